/* The page at / of `ctxr serve`: search, document and index views over the JSON API.
 *
 * No framework and no build step. Every piece of indexed text is put in the page as a text
 * node (never as markup); the server's Content-Security-Policy allows nothing but this file.
 * Where the server has a token, the first request that is refused (401) asks for it; it is
 * kept in sessionStorage (this tab only) and sent as `Authorization: Bearer`.
 */
(() => {
  'use strict';

  const ROOT = document.body.dataset.root || '';
  const TOKEN_KEY = 'ctxr.token';
  const LAST_SEARCH_KEY = 'ctxr.lastSearch';
  // The retrievers' names in the hit schema, in the order the bars show them.
  const SCORE_NAMES = [
    ['dense', 'dense'],
    ['bm25', 'BM25'],
    ['bm25_doc', 'doc BM25'],
    ['fused', 'fused'],
    ['rerank', 'reranked'],
  ];
  const $ = (id) => document.getElementById(id);

  // ---------------------------------------------------------------------------- elements

  /** An element with attributes and children; strings become text nodes, never markup. */
  function h(tag, attrs, ...children) {
    const el = document.createElement(tag);
    for (const [key, value] of Object.entries(attrs || {})) {
      if (value === null || value === undefined || value === false) continue;
      if (key === 'class') el.className = value;
      else if (key === 'text') el.textContent = value;
      else if (key.startsWith('on')) el.addEventListener(key.slice(2), value);
      else el.setAttribute(key, value === true ? '' : String(value));
    }
    append(el, ...children);
    return el;
  }

  function append(el, ...children) {
    for (const child of children.flat()) {
      if (child === null || child === undefined || child === false) continue;
      el.append(child instanceof Node ? child : document.createTextNode(String(child)));
    }
    return el;
  }

  /** `text` with the code-point spans `[start, end)` wrapped in <mark>. */
  function marked(text, spans) {
    const out = document.createDocumentFragment();
    if (!spans || !spans.length) {
      out.append(text);
      return out;
    }
    const points = Array.from(text); // the server counts code points, as Python does
    let at = 0;
    for (const [start, end] of spans) {
      if (start > at) out.append(points.slice(at, start).join(''));
      out.append(h('mark', {}, points.slice(start, end).join('')));
      at = end;
    }
    if (at < points.length) out.append(points.slice(at).join(''));
    return out;
  }

  const number = new Intl.NumberFormat();
  const fmt = (n) => number.format(n);
  const fixed = (n, digits) => (Number.isFinite(n) ? n.toFixed(digits) : String(n));

  const dateFormat = new Intl.DateTimeFormat(undefined, { dateStyle: 'medium', timeStyle: 'short' });
  const relative = new Intl.RelativeTimeFormat(undefined, { numeric: 'auto' });

  function when(iso) {
    if (!iso) return '';
    const date = new Date(iso);
    return Number.isNaN(date.getTime()) ? iso : dateFormat.format(date);
  }

  /** "3 minutes ago", "yesterday": how long ago `iso` was. */
  function ago(iso) {
    const seconds = (new Date(iso).getTime() - Date.now()) / 1000;
    if (!Number.isFinite(seconds)) return iso || '';
    for (const [unit, size] of [['year', 31536000], ['month', 2592000], ['day', 86400],
      ['hour', 3600], ['minute', 60]]) {
      if (Math.abs(seconds) >= size) return relative.format(Math.round(seconds / size), unit);
    }
    return 'just now';
  }

  function trail(path) {
    if (!path || !path.length) return null;
    return h('nav', { class: 'trail', 'aria-label': 'Section' },
      h('ol', {}, path.map((part) => h('li', {}, part))));
  }

  function setStatus(el, text, kind) {
    el.replaceChildren();
    el.className = 'status' + (kind ? ' ' + kind : '');
    if (text instanceof Node) el.append(text);
    else if (text) el.textContent = text;
  }

  // ---------------------------------------------------------------------------- the API

  class ApiError extends Error {
    constructor(status, message) {
      super(message);
      this.status = status;
    }
  }

  let asking = null; // one token prompt for every request refused at once

  async function api(path, options = {}) {
    let refused = false;
    for (;;) {
      const headers = new Headers(options.headers || {});
      const token = sessionStorage.getItem(TOKEN_KEY);
      if (token) headers.set('Authorization', 'Bearer ' + token);
      if (options.json !== undefined) headers.set('Content-Type', 'application/json');
      const response = await fetch(ROOT + path, {
        method: options.method || (options.json !== undefined ? 'POST' : 'GET'),
        headers,
        body: options.json !== undefined ? JSON.stringify(options.json) : undefined,
      });
      if (response.status === 401) {
        if (token && refused) sessionStorage.removeItem(TOKEN_KEY);
        asking = asking || askToken(Boolean(token));
        const given = await asking;
        asking = null;
        if (!given) throw new ApiError(401, 'This server needs its access token (CTXR_API_TOKEN).');
        refused = true;
        continue;
      }
      if (!response.ok) throw new ApiError(response.status, await reason(response));
      return response;
    }
  }

  async function reason(response) {
    let body;
    try {
      body = await response.json();
    } catch {
      return `${response.status} ${response.statusText}`;
    }
    const detail = body && body.detail;
    if (Array.isArray(detail)) {
      return detail.map((d) => `${(d.loc || []).slice(1).join('.') || 'request'}: ${d.msg}`).join('; ');
    }
    return typeof detail === 'string' ? detail : `${response.status} ${response.statusText}`;
  }

  function askToken(wasWrong) {
    const dialog = $('token-dialog');
    const input = $('token');
    $('token-error').textContent = wasWrong ? 'That token was refused. Try again.' : '';
    input.value = '';
    return new Promise((resolve) => {
      const done = (value) => {
        dialog.removeEventListener('close', onClose);
        resolve(value);
      };
      const onClose = () => done(dialog.returnValue === 'ok' && Boolean(input.value.trim()));
      dialog.addEventListener('close', onClose);
      dialog.showModal();
      input.focus();
    });
  }

  $('token-form').addEventListener('submit', (event) => {
    event.preventDefault();
    const token = $('token').value.trim();
    if (!token) return;
    // Stored before the dialog closes: its 'close' event comes a task later, and the
    // page must not look done (dialog gone) while the token is not yet kept.
    sessionStorage.setItem(TOKEN_KEY, token);
    $('token-dialog').close('ok');
  });
  $('token-cancel').addEventListener('click', () => $('token-dialog').close('cancel'));

  async function highlight(query, texts) {
    // Each request stays well under the server's body limit (CTXR_API_MAX_BODY_BYTES).
    const spans = [];
    let batch = [];
    let size = 0;
    const flush = async () => {
      if (!batch.length) return [];
      const body = await (await api('/highlight', { json: { query, texts: batch } })).json();
      spans.push(...body.spans);
      batch = [];
      size = 0;
      return body.terms;
    };
    let terms = [];
    for (const text of texts) {
      if (batch.length && (size + text.length > 12000 || batch.length >= 40)) terms = await flush();
      batch.push(text);
      size += text.length;
    }
    const last = await flush();
    return { terms: last.length ? last : terms, spans };
  }

  // ---------------------------------------------------------------------------- health

  async function checkHealth() {
    const el = $('health');
    try {
      const response = await fetch(ROOT + '/health');
      const body = await response.json();
      if (response.ok) {
        el.className = 'health ok';
        el.textContent = 'Index ready';
        el.title = '';
      } else {
        el.className = 'health bad';
        el.textContent = 'Index unavailable';
        el.title = body.reason || '';
      }
    } catch {
      el.className = 'health bad';
      el.textContent = 'Server unreachable';
    }
  }

  // ---------------------------------------------------------------------------- routing

  function route() {
    const hash = location.hash.replace(/^#/, '') || '/';
    const [path, query = ''] = hash.split('?');
    const params = new URLSearchParams(query);
    const views = {
      search: $('view-search'), doc: $('view-doc'), index: $('view-index'), trial: $('view-trial'),
    };
    let view = 'search';
    if (path.startsWith('/doc/')) view = 'doc';
    else if (path === '/index') view = 'index';
    else if (path === '/trial') view = 'trial';
    for (const [name, el] of Object.entries(views)) el.hidden = name !== view;
    for (const link of document.querySelectorAll('.views a[data-view]')) {
      if (link.dataset.view === view) link.setAttribute('aria-current', 'page');
      else link.removeAttribute('aria-current');
    }
    if (view === 'doc') showDocument(decodeURIComponent(path.slice('/doc/'.length)), params);
    else if (view === 'index') showIndex();
    else if (view === 'trial') showTrials();
    else showSearch(params);
  }

  window.addEventListener('hashchange', route);

  // ---------------------------------------------------------------------------- search

  const form = $('search-form');
  let facetsLoaded = false;
  let lastShown = null; // the hash of the hits on screen, so returning does not search again
  let openedChunk = null;

  function searchParams() {
    const params = new URLSearchParams();
    params.set('q', $('q').value.trim());
    for (const [id, key] of [['mode', 'mode'], ['fusion', 'fusion'], ['k', 'k'],
      ['f-source', 'source'], ['f-kind', 'kind'], ['f-language', 'lang']]) {
      const value = $(id).value.trim();
      if (value && !(key === 'mode' && value === 'hybrid') && !(key === 'k' && value === '10')) {
        params.set(key, value);
      }
    }
    return params;
  }

  function fillForm(params) {
    $('q').value = params.get('q') || '';
    $('mode').value = params.get('mode') || 'hybrid';
    $('fusion').value = params.get('fusion') || '';
    $('k').value = params.get('k') || '10';
    $('f-source').value = params.get('source') || '';
    setSelect($('f-kind'), params.get('kind') || '');
    setSelect($('f-language'), params.get('lang') || '');
    $('fusion').disabled = $('mode').value !== 'hybrid';
  }

  /** Select `value`, adding it as an option when the facets have not named it (yet). */
  function setSelect(select, value) {
    if (value && ![...select.options].some((o) => o.value === value)) {
      select.append(h('option', { value }, value.replace(/^[a-z_]+:/, '')));
    }
    select.value = value;
  }

  form.addEventListener('submit', (event) => {
    event.preventDefault();
    if (!$('q').value.trim()) {
      $('q').focus();
      return;
    }
    const hash = '#/?' + searchParams().toString();
    if (location.hash === hash) runSearch(new URLSearchParams(hash.split('?')[1]));
    else location.hash = hash;
  });
  $('mode').addEventListener('change', () => {
    $('fusion').disabled = $('mode').value !== 'hybrid';
  });

  function showSearch(params) {
    fillForm(params);
    loadFacets();
    const hash = location.hash || '#/';
    if (!params.get('q')) {
      $('hits').replaceChildren();
      setStatus($('search-status'), 'Type a query: each hit shows why it was found.');
      lastShown = hash;
      $('q').focus();
      return;
    }
    if (lastShown === hash && $('hits').children.length) {
      focusOpened();
      return;
    }
    runSearch(params);
  }

  async function loadFacets() {
    if (facetsLoaded) return;
    facetsLoaded = true;
    try {
      const overview = await (await api('/overview')).json();
      const kind = $('f-kind');
      for (const group of overview.kinds) {
        if (![...kind.options].some((o) => o.value === group.name)) {
          kind.append(h('option', { value: group.name }, group.name));
        }
      }
      const lang = $('f-language');
      const chosen = lang.value;
      for (const [label, field, groups] of [['Code', 'language', overview.languages],
        ['Prose', 'natural_language', overview.natural_languages]]) {
        const named = groups.filter((g) => g.name !== 'unknown');
        if (!named.length) continue;
        lang.append(h('optgroup', { label },
          named.map((g) => h('option', { value: `${field}:${g.name}` }, g.name))));
      }
      for (const option of [...lang.options]) {
        if (option.parentElement === lang && option.value && option.value !== chosen) option.remove();
      }
      lang.value = chosen;
    } catch {
      facetsLoaded = false; // asked again next time (a token, an index that opens later)
    }
  }

  function searchBody(params) {
    const body = { query: params.get('q'), k: Number(params.get('k') || 10) };
    const mode = params.get('mode') || 'hybrid';
    body.mode = mode;
    if (mode === 'hybrid' && params.get('fusion')) body.fusion = params.get('fusion');
    const filters = {};
    if (params.get('source')) filters.source = params.get('source');
    if (params.get('kind')) filters.kind = params.get('kind');
    const lang = params.get('lang');
    if (lang && lang.includes(':')) {
      const [field, value] = lang.split(':');
      filters[field] = value;
    }
    if (Object.keys(filters).length) body.filters = filters;
    return body;
  }

  async function runSearch(params) {
    const status = $('search-status');
    const list = $('hits');
    const body = searchBody(params);
    setStatus(status, 'Searching…', 'busy');
    list.setAttribute('aria-busy', 'true');
    try {
      const response = await api('/search', { json: body });
      const result = await response.json();
      const timing = /dur=([\d.]+)/.exec(response.headers.get('Server-Timing') || '');
      renderHits(result, timing ? Number(timing[1]) : null);
      lastShown = location.hash;
      sessionStorage.setItem(LAST_SEARCH_KEY, location.hash);
      const texts = result.hits.flatMap((hit) => [hit.context, hit.text]);
      if (result.hits.length) markHits(result.query, texts);
    } catch (error) {
      list.replaceChildren();
      setStatus(status, error.message, 'error');
    } finally {
      list.removeAttribute('aria-busy');
    }
  }

  async function markHits(query, texts) {
    let found;
    try {
      found = await highlight(query, texts);
    } catch {
      return; // the hits stand without marks
    }
    const items = $('hits').querySelectorAll('.hit');
    items.forEach((item, i) => {
      const context = item.querySelector('.context-text');
      const text = item.querySelector('.hit-text');
      if (context) context.replaceChildren(marked(texts[2 * i], found.spans[2 * i]));
      if (text) text.replaceChildren(marked(texts[2 * i + 1], found.spans[2 * i + 1]));
    });
    const terms = $('search-terms');
    if (terms) {
      terms.replaceChildren(found.terms.length
        ? append(h('span', {}), 'BM25 terms: ', found.terms.map((t) => h('code', {}, t)))
        : 'No BM25 terms in this query (stop words only).');
    }
  }

  function describe(result, ms) {
    const how = [result.mode === 'bm25' ? 'BM25' : result.mode];
    if (result.fusion) how.push(result.fusion.toUpperCase() + ' fusion');
    const n = result.hits.length;
    const parts = [`${n} ${n === 1 ? 'hit' : 'hits'} · ${how.join(', ')}`];
    if (ms !== null) parts.push(`${fixed(ms, 1)} ms`);
    return h('div', { class: 'status-line' },
      h('span', {}, parts.join(' · ')),
      h('span', { id: 'search-terms', class: 'terms' }));
  }

  /** The bars of a hit: each retriever's score against the best of its kind on screen. */
  function scoreRows(hits, mode) {
    const rows = hits.map((hit) => {
      const scores = { ...hit.scores };
      if (mode === 'hybrid' && !scores.fused && !scores.rerank) {
        scores.fused = { score: hit.score, rank: hit.rank };
      }
      return scores;
    });
    const best = {};
    for (const scores of rows) {
      for (const [name, part] of Object.entries(scores)) {
        best[name] = Math.max(best[name] || 0, part.score);
      }
    }
    return rows.map((scores) => SCORE_NAMES.filter(([name]) => name in best).map(([name, label]) => {
      const part = scores[name];
      const share = part && best[name] > 0 ? Math.max(0, part.score) / best[name] : 0;
      return { name, label, part, share };
    }));
  }

  function renderHits(result, ms) {
    const list = $('hits');
    const status = $('search-status');
    setStatus(status, describe(result, ms));
    if (result.warnings.length) {
      status.append(h('ul', { class: 'warnings' }, result.warnings.map((w) => h('li', {}, w))));
    }
    if (!result.hits.length) {
      list.replaceChildren();
      status.append(h('p', {}, 'Nothing matched. Try other words, another mode, or fewer filters.'));
      return;
    }
    const rows = scoreRows(result.hits, result.mode);
    const query = result.query;
    list.replaceChildren(...result.hits.map((hit, i) => renderHit(hit, rows[i], query)));
    list.prepend(h('li', { class: 'legend', 'aria-hidden': 'true' },
      'Bars: each score against the best of its kind among these hits; # is the rank in that list.'));
  }

  function docLink(hit, query) {
    const params = new URLSearchParams({ chunk: hit.chunk_id, q: query });
    return `#/doc/${encodeURIComponent(hit.doc_id)}?${params}`;
  }

  function renderHit(hit, bars, query) {
    const long = hit.text.length > 700;
    const text = h('p', { class: 'hit-text' + (long ? ' clipped' : ''), id: `text-${hit.rank}` }, hit.text);
    const more = long ? h('button', {
      type: 'button', class: 'more', 'aria-expanded': 'false', 'aria-controls': `text-${hit.rank}`,
      onclick: (event) => {
        const open = text.classList.toggle('clipped') === false;
        event.currentTarget.setAttribute('aria-expanded', String(open));
        event.currentTarget.textContent = open ? 'Show less' : 'Show all';
      },
    }, 'Show all') : null;
    const pages = hit.pages && hit.pages.length ? h('span', { class: 'pages' },
      hit.pages.length === 1 ? `p. ${hit.pages[0]}` : `pp. ${hit.pages[0]}–${hit.pages.at(-1)}`) : null;
    return h('li', { class: 'hit', 'data-chunk': hit.chunk_id },
      h('div', { class: 'hit-head' },
        h('span', { class: 'rank', 'aria-label': `rank ${hit.rank}` }, String(hit.rank)),
        h('a', { class: 'source', href: docLink(hit, query) }, hit.source),
        pages,
        h('span', { class: 'offsets', title: 'characters in the document' },
          `${fmt(hit.start)}–${fmt(hit.end)}`)),
      trail(hit.heading_path),
      hit.context ? h('p', { class: 'context' },
        h('span', { class: 'label' }, 'Context'), ' ',
        h('span', { class: 'context-text' }, hit.context)) : null,
      text, more,
      h('div', { class: 'scores', role: 'group', 'aria-label': 'Score breakdown' },
        bars.map((bar) => scoreBar(bar))),
      hit.flags.length ? h('ul', { class: 'flags' }, hit.flags.map((f) => h('li', {}, f))) : null);
  }

  function scoreBar({ name, label, part, share }) {
    const fill = h('span', { class: `fill s-${name}` });
    fill.style.width = `${(share * 100).toFixed(1)}%`;
    const value = part ? `${fixed(part.score, part.score >= 10 ? 1 : 3)} · #${part.rank}` : 'not ranked';
    return h('div', { class: 'score' + (part ? '' : ' missing'), 'data-score': name },
      h('span', { class: 'score-name' }, label),
      h('span', { class: 'bar', role: 'presentation' }, fill),
      h('span', { class: 'score-value' }, value));
  }

  function hitLinks() {
    return [...$('hits').querySelectorAll('.hit a.source')];
  }

  function focusOpened() {
    const links = hitLinks();
    const item = openedChunk && $('hits').querySelector(`.hit[data-chunk="${CSS.escape(openedChunk)}"] a.source`);
    (item || links[0])?.focus();
  }

  // ---------------------------------------------------------------------------- document

  async function showDocument(docId, params) {
    const chunkId = params.get('chunk');
    const query = params.get('q') || '';
    openedChunk = chunkId;
    const status = $('doc-status');
    const back = sessionStorage.getItem(LAST_SEARCH_KEY);
    $('doc-back').setAttribute('href', back || '#/');
    $('doc-title').textContent = docId;
    $('doc-meta').replaceChildren();
    $('doc-map').replaceChildren();
    $('chunks').replaceChildren();
    setStatus(status, 'Loading the document…', 'busy');
    let doc;
    try {
      const path = '/documents/' + docId.split('/').map(encodeURIComponent).join('/');
      doc = await (await api(path)).json();
    } catch (error) {
      setStatus(status, error.message, 'error');
      return;
    }
    setStatus(status, '');
    renderDocument(doc, chunkId);
    const hit = chunkId && document.getElementById(`chunk-${chunkId}`);
    if (hit) {
      reveal(hit, true);
      hit.focus({ preventScroll: true });
      if (query) markChunk(hit, query);
    } else {
      $('doc-title').focus();
    }
  }

  /** Scroll `el` into the room the sticky bars leave: its top just below them (`top`), or,
   * otherwise, only as far as it takes to show it. */
  function reveal(el, top) {
    const head = document.querySelector('.doc-head');
    const style = getComputedStyle(head);
    const covered = (style.position === 'sticky'
      ? parseFloat(style.top) + head.offsetHeight
      : document.querySelector('.topbar').offsetHeight) + 12;
    const box = el.getBoundingClientRect();
    let delta = 0;
    if (top || box.top < covered || box.height > window.innerHeight - covered) delta = box.top - covered;
    else if (box.bottom > window.innerHeight - 12) delta = box.bottom - (window.innerHeight - 12);
    window.scrollBy(0, delta);
  }

  function renderDocument(doc, hitId) {
    $('doc-title').textContent = doc.title || doc.source;
    const tokens = doc.chunks.reduce((sum, c) => sum + (c.token_count || 0), 0);
    const facts = [doc.source, doc.kind, doc.language, `${fmt(doc.chunks.length)} chunks`,
      `${fmt(tokens)} tokens`, doc.indexed_at ? `indexed ${when(doc.indexed_at)}` : null];
    $('doc-meta').replaceChildren(...facts.filter(Boolean).map((f) => h('span', {}, f)));
    const length = Math.max(1, ...doc.chunks.map((c) => c.end));
    $('doc-map').replaceChildren(...doc.chunks.map((chunk) => {
      const segment = h('a', {
        class: 'seg' + (chunk.chunk_id === hitId ? ' seg-hit' : ''),
        href: `#chunk-${chunk.chunk_id}`,
        title: `chunk ${chunk.index}: ${fmt(chunk.start)}–${fmt(chunk.end)}, ${chunk.token_count ?? '?'} tokens`,
        'aria-label': `chunk ${chunk.index}${chunk.chunk_id === hitId ? ' (the hit)' : ''}`,
        onclick: (event) => {
          event.preventDefault();
          const target = document.getElementById(`chunk-${chunk.chunk_id}`);
          reveal(target, true);
          target.focus({ preventScroll: true });
        },
      });
      segment.style.flexGrow = String(Math.max(chunk.end - chunk.start, length / 400));
      return segment;
    }));
    const code = doc.kind === 'code';
    const items = [];
    doc.chunks.forEach((chunk, i) => {
      const previous = doc.chunks[i - 1];
      if (previous && chunk.start !== previous.end) {
        const gap = chunk.start - previous.end;
        items.push(h('li', {
          class: 'gap', 'aria-hidden': 'true', title: `${fmt(previous.end)}–${fmt(chunk.start)}`,
        }, gap > 0 ? `${fmt(gap)} ${gap === 1 ? 'character' : 'characters'} between`
          : `overlaps the chunk before by ${fmt(-gap)} ${gap === -1 ? 'character' : 'characters'}`));
      }
      items.push(renderChunk(chunk, chunk.chunk_id === hitId, code));
    });
    $('chunks').replaceChildren(...items);
  }

  function renderChunk(chunk, isHit, code) {
    const contextLabel = chunk.context_kind === 'llm' ? 'LLM context'
      : chunk.context_kind ? `${chunk.context_kind[0].toUpperCase()}${chunk.context_kind.slice(1)} context` : 'Context';
    return h('li', {
      class: 'chunk' + (isHit ? ' is-hit' : ''), id: `chunk-${chunk.chunk_id}`, tabindex: '-1',
      'aria-current': isHit ? 'true' : null, 'aria-label': `Chunk ${chunk.index}${isHit ? ', the hit' : ''}`,
    },
      h('div', { class: 'chunk-meta' },
        h('span', { class: 'chunk-index' }, `#${chunk.index}`),
        isHit ? h('span', { class: 'badge' }, 'hit') : null,
        h('span', {}, `characters ${fmt(chunk.start)}–${fmt(chunk.end)}`),
        h('span', {}, chunk.token_count === null ? 'tokens unknown' : `${fmt(chunk.token_count)} tokens`),
        h('span', { class: `kind k-${chunk.context_kind || 'none'}` }, chunk.context_kind || 'no context')),
      trail(chunk.heading_path),
      chunk.prefix ? h('div', { class: 'prefix' },
        h('span', { class: 'label' }, 'Prefix'),
        h('span', { class: 'note' }, ' repeated before the chunk when it is embedded'),
        h('pre', {}, chunk.prefix)) : null,
      h('div', { class: 'chunk-context' },
        h('span', { class: 'label' }, contextLabel),
        chunk.context ? h('p', { class: 'context-text' }, chunk.context) : h('p', { class: 'none' }, 'none')),
      h(code ? 'pre' : 'div', { class: 'chunk-text' + (code ? ' code' : '') }, chunk.text));
  }

  async function markChunk(item, query) {
    const context = item.querySelector('.chunk-context .context-text');
    const text = item.querySelector('.chunk-text');
    const texts = [context ? context.textContent : '', text.textContent];
    try {
      const found = await highlight(query, texts);
      if (context) context.replaceChildren(marked(texts[0], found.spans[0]));
      text.replaceChildren(marked(texts[1], found.spans[1]));
    } catch {
      // the chunk stands without marks
    }
  }

  // ---------------------------------------------------------------------------- index

  /** A view that shows one JSON answer: `busy` while it loads, the error in its place. */
  async function showAnswer(view, path, busy, render) {
    const status = $(`${view}-status`);
    const body = $(`${view}-body`);
    setStatus(status, busy, 'busy');
    let answer;
    try {
      answer = await (await api(path)).json();
    } catch (error) {
      body.replaceChildren();
      setStatus(status, error.message, 'error');
      return;
    }
    setStatus(status, '');
    body.replaceChildren(...render(answer));
  }

  function showIndex() {
    return showAnswer('index', '/overview', 'Reading the index…', renderIndex);
  }

  function card(label, value, note) {
    return h('div', { class: 'card' },
      h('div', { class: 'card-label' }, label),
      h('div', { class: 'card-value' }, value),
      note ? h('div', { class: 'card-note' }, note) : null);
  }

  function section(title, ...children) {
    const id = 'sec-' + title.toLowerCase().replace(/[^a-z]+/g, '-');
    return h('section', { class: 'panel', 'aria-labelledby': id }, h('h2', { id }, title), ...children);
  }

  /** A table whose first column heads its rows; `numeric[i]` right-aligns column i, and
   * `paths` lets long file paths wrap anywhere. */
  function table(caption, headers, rows, numeric, paths = false, kind = null) {
    return h('div', { class: 'table-wrap' }, h('table', { class: kind },
      h('caption', { class: 'sr-only' }, caption),
      h('thead', {}, h('tr', {}, headers.map((t, i) => h('th', { scope: 'col', class: numeric[i] ? 'num' : null }, t)))),
      h('tbody', {}, rows.map((row) => h('tr', {}, row.map((cell, i) => (i === 0
        ? h('th', { scope: 'row', class: paths ? 'path' : null }, cell)
        : h('td', { class: numeric[i] ? 'num' : null }, cell))))))));
  }

  function groupTable(caption, groups, total) {
    if (!groups.length) return h('p', { class: 'none' }, 'None.');
    return table(caption, ['', 'documents', 'chunks', 'tokens', 'share'],
      groups.map((g) => {
        const fill = h('span', { class: 'fill' });
        fill.style.width = `${((g.chunks / Math.max(1, total)) * 100).toFixed(1)}%`;
        return [g.name, fmt(g.documents), fmt(g.chunks), fmt(g.tokens),
          h('span', { class: 'share' }, h('span', { class: 'bar' }, fill),
            h('span', {}, `${Math.round((g.chunks / Math.max(1, total)) * 100)}%`))];
      }), [false, true, true, true, false], false, 'groups');
  }

  function histogram(sizes) {
    if (!sizes) return h('p', { class: 'none' }, 'No chunks.');
    const top = Math.max(...sizes.bins.map((b) => b.chunks), 1);
    const label = `Chunk sizes: median ${fmt(sizes.median)} tokens, 10th percentile ${fmt(sizes.p10)}, 90th ${fmt(sizes.p90)}, largest ${fmt(sizes.max)}.`;
    const bars = sizes.bins.map((bin) => {
      const bar = h('span', { class: 'hbar' });
      bar.style.height = `${((bin.chunks / top) * 100).toFixed(1)}%`;
      return h('li', { title: `${fmt(bin.low)}–${fmt(bin.high - 1)} tokens: ${fmt(bin.chunks)} chunks` },
        h('span', { class: 'hcount' }, bin.chunks ? fmt(bin.chunks) : ''), bar,
        h('span', { class: 'sr-only' }, `${fmt(bin.low)} to ${fmt(bin.high - 1)} tokens: ${fmt(bin.chunks)} chunks`));
    });
    const first = sizes.bins[0];
    const last = sizes.bins.at(-1);
    return h('figure', { class: 'histogram' },
      h('ol', { class: 'hbars', 'aria-label': 'Chunks per size' }, bars),
      h('div', { class: 'haxis', 'aria-hidden': 'true' },
        h('span', {}, fmt(first.low)), h('span', {}, `${fmt(Math.round((first.low + last.high) / 2))}`),
        h('span', {}, `${fmt(last.high)} tokens`)),
      h('figcaption', {}, label));
  }

  function tokenBar(tokens) {
    const kinds = [['input', 'uncached input'], ['cache_write', 'cache write'],
      ['cache_write_1h', 'cache write (1 h)'], ['cache_read', 'cache read'], ['output', 'output']];
    const total = kinds.reduce((sum, [key]) => sum + tokens[key], 0);
    if (!total) return null;
    const bar = h('div', { class: 'stack', role: 'presentation' });
    for (const [key] of kinds) {
      if (!tokens[key]) continue;
      const part = h('span', { class: `t-${key}` });
      part.style.flexGrow = String(tokens[key]);
      bar.append(part);
    }
    return h('div', { class: 'tokens' }, bar,
      h('ul', { class: 'keys' }, kinds.filter(([key]) => tokens[key]).map(([key, label]) =>
        h('li', {}, h('span', { class: `swatch t-${key}` }), `${label} ${fmt(tokens[key])}`))));
  }

  function dollars(value) {
    return value === null || value === undefined ? 'unpriced' : `$${value < 1 ? value.toFixed(4) : value.toFixed(2)}`;
  }

  function renderIndex(o) {
    const parts = [];
    const llmChunks = o.contexts.find((c) => c.name === 'llm');
    parts.push(h('div', { class: 'cards' },
      card('Documents', fmt(o.documents)),
      card('Chunks', fmt(o.chunks), o.sizes ? `median ${fmt(o.sizes.median)} tokens` : null),
      card('Tokens', fmt(o.tokens), 'in the chunks’ own text'),
      card('LLM contexts', llmChunks ? `${Math.round((llmChunks.chunks / Math.max(1, o.chunks)) * 100)}%` : 'none',
        llmChunks ? `${fmt(llmChunks.chunks)} of ${fmt(o.chunks)} chunks` : 'outline contexts only'),
      card('Updated', ago(o.updated_at), `created ${when(o.created_at)}`)));
    parts.push(section('By kind', groupTable('Documents and chunks by kind', o.kinds, o.chunks)));
    const languages = [];
    if (o.languages.length) languages.push(h('h3', {}, 'Code'), groupTable('Code by language', o.languages, o.chunks));
    if (o.natural_languages.length) languages.push(h('h3', {}, 'Prose'), groupTable('Prose by language', o.natural_languages, o.chunks));
    parts.push(section('By language', languages.length ? languages : h('p', { class: 'none' }, 'None.')));
    parts.push(section('Chunk sizes', histogram(o.sizes)));
    parts.push(section('Contexts', groupTable('Chunks by context kind', o.contexts, o.chunks)));

    const run = o.last_run;
    if (run) {
      const summary = `${when(run.finished_at)}: ${fmt(run.documents_indexed)} documents indexed, ` +
        `${fmt(run.documents_unchanged)} unchanged, ${fmt(run.documents_removed)} removed; ` +
        `${fmt(run.chunks_written)} chunks written in ${fixed(run.seconds, 1)} s` +
        (run.interrupted ? ' (interrupted)' : '');
      parts.push(section('Skipped and failed',
        h('p', {}, 'Last run ', summary),
        run.skipped_files.length
          ? table('Files the last run skipped', ['file', 'why it was skipped'],
            run.skipped_files.map((s) => [s.path, s.reason]), [false, false], true)
          : h('p', { class: 'none' }, 'Nothing was skipped.'),
        run.failed_files.length
          ? table('Files that failed', ['file', 'what failed'],
            run.failed_files.map((s) => [s.path, s.reason]), [false, false], true)
          : h('p', { class: 'none' }, 'Nothing failed.'),
        run.notices.length ? h('ul', { class: 'notices' }, run.notices.map((n) => h('li', {}, n))) : null));
      parts.push(section('Runs', table('Recent runs', ['finished', 'indexed', 'unchanged', 'removed',
        'chunks written', 'skipped', 'failed', 'seconds'],
      o.runs.map((r) => [when(r.finished_at), fmt(r.documents_indexed), fmt(r.documents_unchanged),
        fmt(r.documents_removed), fmt(r.chunks_written), fmt(r.skipped), fmt(r.failed), fixed(r.seconds, 1)]),
      [false, true, true, true, true, true, true, true])));
    } else {
      parts.push(section('Skipped and failed', h('p', { class: 'none' },
        'This index keeps no run reports (it was built before ctxr kept them); the next `ctxr index` run writes one.')));
    }

    const llm = o.llm;
    if (llm.runs) {
      parts.push(section('LLM ledger',
        h('div', { class: 'cards' },
          card('Requests', fmt(llm.requests), `${fmt(llm.runs)} ${llm.runs === 1 ? 'run' : 'runs'}`),
          card('Dollars', dollars(llm.dollars), llm.unpriced_runs ? `${llm.unpriced_runs} unpriced runs not counted` : 'at the price table’s rates'),
          card('Cache reads', `${Math.round(llm.cache_read_share * 100)}%`, 'of prompt tokens'),
          card('Output tokens', fmt(llm.tokens.output))),
        tokenBar(llm.tokens),
        table('LLM runs', ['started', 'model', 'requests', 'prompt tokens', 'output', 'cache reads', 'dollars'],
          o.llm_runs.map((r) => [when(r.started_at), `${r.provider} ${r.model}${r.batch ? ' (batch)' : ''}`,
            fmt(r.requests),
            fmt(r.tokens.input + r.tokens.cache_write + r.tokens.cache_write_1h + r.tokens.cache_read),
            fmt(r.tokens.output), `${Math.round(r.cache_read_share * 100)}%`, dollars(r.dollars)]),
          [false, false, true, true, true, true, true])));
    } else {
      parts.push(section('LLM ledger', h('p', { class: 'none' },
        'No LLM wrote contexts for this index: its chunks carry outline contexts (title, path and headings).')));
    }
    parts.push(section('Built with', h('dl', { class: 'facts' },
      Object.entries(o.settings).flatMap(([k, v]) => [h('dt', {}, k.replace(/_/g, ' ')), h('dd', {}, String(v))]))));
    return parts;
  }

  // ---------------------------------------------------------------------------- trial

  function showTrials() {
    return showAnswer('trial', '/trials', 'Reading the trial reports…', (answer) => (
      answer.trials.length ? answer.trials.flatMap(renderTrial) : [h('p', { class: 'none' },
        'No trial report was given to this server. Run `ctxr trial PATH --out ctxr-trial` to ' +
        'measure outline against LLM contexts on a sample of your documents, then start ' +
        '`ctxr serve --trial ctxr-trial`.')]));
  }

  function percent(value) {
    return `${(value * 100).toFixed(1)}`;
  }

  function renderTrial(t) {
    if (t.error) {
      return [section(`Trial ${t.path}`, h('p', { class: 'error' }, `${t.path}: ${t.error}`))];
    }
    const parts = [];
    const asked = t.questions.count ?? null;
    parts.push(h('p', { class: 'verdict' }, t.verdict));
    parts.push(h('p', { class: 'trial-source' }, `From ${t.path}` +
      (asked !== null ? `; ${fmt(asked)} questions` : '') +
      `; every row against ${t.baseline} on ${t.metric}.`));
    const metrics = t.metrics.length ? t.metrics : Object.keys(t.rows[0]?.scores ?? {});
    parts.push(section('Scores', table('Each row’s scores with their intervals',
      ['row', ...metrics],
      t.rows.map((r) => [r.llm ? `${r.name} (${r.llm})` : r.name,
        ...metrics.map((m) => {
          const s = r.scores[m];
          if (!r.available || !s) return r.note || 'n/a';
          return h('span', { class: 'interval' }, h('strong', {}, percent(s.mean)),
            h('span', { class: 'range' }, ` ${percent(s.low)}–${percent(s.high)}`));
        })]),
      [false, ...metrics.map(() => true)])));
    const headline = t.comparisons.filter((c) => c.metric === t.metric);
    if (headline.length) {
      parts.push(section('Against the baseline', h('ul', { class: 'comparisons' },
        headline.map((c) => h('li', { class: c.significant ? 'significant' : 'noise' }, c.sentence)))));
    }
    if (t.costs.length) {
      parts.push(section('What LLM contexts cost', table('LLM contexts: cost',
        ['rows', 'model', 'paid on the sample', 'whole corpus', 'batch'],
        t.costs.map((c) => [c.rows.join(', '), `${c.provider}/${c.model}`,
          c.paid_on_sample ? dollars(c.paid_on_sample.dollars) : 'nothing sent',
          c.estimate_corpus ? dollars(c.estimate_corpus.standard) : 'no price',
          c.estimate_corpus ? dollars(c.estimate_corpus.batch) : 'no price']),
        [false, false, true, true, true])));
    }
    if (t.notes.length) {
      parts.push(section('Notes', h('ul', { class: 'notices' }, t.notes.map((n) => h('li', {}, n)))));
    }
    return parts;
  }

  // ---------------------------------------------------------------------------- keys

  function typing(target) {
    return target instanceof HTMLElement &&
      (target.isContentEditable || ['INPUT', 'SELECT', 'TEXTAREA'].includes(target.tagName));
  }

  document.addEventListener('keydown', (event) => {
    if (event.defaultPrevented || event.ctrlKey || event.metaKey || event.altKey) return;
    if ($('token-dialog').open) return;
    const searching = !$('view-search').hidden;
    const reading = !$('view-doc').hidden;
    if (event.key === '/' && !typing(event.target)) {
      event.preventDefault();
      if (!searching) location.hash = sessionStorage.getItem(LAST_SEARCH_KEY) || '#/';
      $('q').focus();
      $('q').select();
      return;
    }
    if (searching && (event.key === 'ArrowDown' || event.key === 'ArrowUp')) {
      const links = hitLinks();
      if (!links.length) return;
      if (typing(event.target) && !(event.target.id === 'q' && event.key === 'ArrowDown')) return;
      const at = links.indexOf(document.activeElement);
      const next = event.key === 'ArrowDown' ? Math.min(at + 1, links.length - 1) : at - 1;
      event.preventDefault();
      if (next < 0) $('q').focus();
      else {
        links[next].focus();
        links[next].closest('.hit').scrollIntoView({ block: 'nearest' });
      }
      return;
    }
    if (reading && !typing(event.target)) {
      if (event.key === 'Escape') {
        event.preventDefault();
        location.hash = $('doc-back').getAttribute('href');
        return;
      }
      if (event.key === 'ArrowDown' || event.key === 'ArrowUp') {
        const chunks = [...$('chunks').querySelectorAll('.chunk')];
        if (!chunks.length) return;
        const at = chunks.indexOf(document.activeElement.closest ? document.activeElement.closest('.chunk') : null);
        const next = event.key === 'ArrowDown' ? Math.min(at + 1, chunks.length - 1) : Math.max(at - 1, 0);
        event.preventDefault();
        chunks[next].focus({ preventScroll: true });
        reveal(chunks[next], false);
      }
    }
  });

  checkHealth();
  route();
})();
