// Package ratelimit implements Lumen's per-client request limiter.
//
// Each client (identified by its IP address, or by the first untrusted hop of
// X-Forwarded-For when the request came through a trusted proxy) owns a token
// bucket. The bucket holds at most Burst tokens and refills at
// RequestsPerMinute/60 tokens per second. A request that finds the bucket
// empty is answered with HTTP 429 and told how long to wait.
package ratelimit

import (
	"encoding/json"
	"math"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"
)

// Config mirrors the rate_limit section of lumen.toml.
type Config struct {
	RequestsPerMinute int // rate_limit.requests_per_minute, default 120
	Burst             int // rate_limit.burst, default 20
	TrustedProxies    []*net.IPNet
}

type bucket struct {
	tokens float64
	last   time.Time
}

// Limiter hands out tokens per client. The zero value is not usable; call New.
type Limiter struct {
	cfg     Config
	mu      sync.Mutex
	buckets map[string]*bucket
	now     func() time.Time
}

// New returns a Limiter for cfg. Buckets idle for more than ten minutes are
// dropped by a background sweep so that memory stays bounded.
func New(cfg Config) *Limiter {
	l := &Limiter{cfg: cfg, buckets: make(map[string]*bucket), now: time.Now}
	go l.sweep(10 * time.Minute)
	return l
}

// Allow takes one token for client. When the bucket is empty it returns false
// and the time until the next token is available.
func (l *Limiter) Allow(client string) (bool, time.Duration) {
	l.mu.Lock()
	defer l.mu.Unlock()
	rate := float64(l.cfg.RequestsPerMinute) / 60.0 // tokens per second
	now := l.now()
	b, ok := l.buckets[client]
	if !ok {
		b = &bucket{tokens: float64(l.cfg.Burst), last: now}
		l.buckets[client] = b
	}
	b.tokens = math.Min(float64(l.cfg.Burst), b.tokens+now.Sub(b.last).Seconds()*rate)
	b.last = now
	if b.tokens >= 1 {
		b.tokens--
		return true, 0
	}
	wait := time.Duration((1 - b.tokens) / rate * float64(time.Second))
	return false, wait
}

type tooManyRequests struct {
	Error        string `json:"error"`
	RetryAfterMs int64  `json:"retry_after_ms"`
}

// Middleware rejects over-limit requests with 429 before they reach next.
// The body carries retry_after_ms; the Retry-After header carries the same
// delay rounded up to whole seconds, as RFC 9110 allows only seconds there.
func (l *Limiter) Middleware(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ok, wait := l.Allow(l.clientKey(r))
		if ok {
			next.ServeHTTP(w, r)
			return
		}
		secs := int64(math.Ceil(wait.Seconds()))
		w.Header().Set("Retry-After", strconv.FormatInt(secs, 10))
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusTooManyRequests)
		_ = json.NewEncoder(w).Encode(tooManyRequests{
			Error:        "rate_limited",
			RetryAfterMs: wait.Milliseconds(),
		})
	})
}

// clientKey picks the address a request is charged to. Without trusted
// proxies configured, every request behind a reverse proxy shares one key.
func (l *Limiter) clientKey(r *http.Request) string {
	host, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		return r.RemoteAddr
	}
	if l.trusted(net.ParseIP(host)) {
		if fwd := lastUntrustedHop(r.Header.Get("X-Forwarded-For"), l.trusted); fwd != "" {
			return fwd
		}
	}
	return host
}

func (l *Limiter) trusted(ip net.IP) bool {
	for _, n := range l.cfg.TrustedProxies {
		if n.Contains(ip) {
			return true
		}
	}
	return false
}

// lastUntrustedHop walks X-Forwarded-For from the right and returns the first
// address that is not one of our own proxies.
func lastUntrustedHop(header string, trusted func(net.IP) bool) string {
	hops := strings.Split(header, ",")
	for i := len(hops) - 1; i >= 0; i-- {
		hop := strings.TrimSpace(hops[i])
		if ip := net.ParseIP(hop); ip != nil && !trusted(ip) {
			return hop
		}
	}
	return ""
}

func (l *Limiter) sweep(idle time.Duration) {
	for range time.Tick(idle) {
		l.mu.Lock()
		for k, b := range l.buckets {
			if l.now().Sub(b.last) > idle {
				delete(l.buckets, k)
			}
		}
		l.mu.Unlock()
	}
}
