/* A tiny open-addressing hash map from strings to ints. */
#include <stdlib.h>
#include <string.h>

#define INITIAL_CAPACITY 16

struct entry {
    char *key;
    int value;
};

struct map {
    struct entry *entries;
    size_t capacity;
    size_t count;
};

static unsigned long hash(const char *s) {
    unsigned long h = 5381;
    int c;
    while ((c = *s++)) {
        h = ((h << 5) + h) + (unsigned long)c;
    }
    return h;
}

struct map *map_new(void) {
    struct map *m = malloc(sizeof *m);
    if (!m) return NULL;
    m->capacity = INITIAL_CAPACITY;
    m->count = 0;
    m->entries = calloc(m->capacity, sizeof *m->entries);
    return m;
}

int map_get(const struct map *m, const char *key, int *out) {
    size_t i = hash(key) % m->capacity;
    while (m->entries[i].key) {
        if (strcmp(m->entries[i].key, key) == 0) {
            *out = m->entries[i].value;
            return 1;
        }
        i = (i + 1) % m->capacity;
    }
    return 0;
}

void map_free(struct map *m) {
    for (size_t i = 0; i < m->capacity; i++) {
        free(m->entries[i].key);
    }
    free(m->entries);
    free(m);
}
