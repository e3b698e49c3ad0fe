package cache

import (
	"container/list"
	"errors"
	"sync"
	"time"
)

// ErrInvalidCapacity is returned when a cache is created with a non-positive size.
var ErrInvalidCapacity = errors.New("cache: capacity must be greater than zero")

// EvictCallback is invoked whenever an entry is removed to make room for another.
type EvictCallback[K comparable, V any] func(key K, value V)

type entry[K comparable, V any] struct {
	key       K
	value     V
	expiresAt time.Time
}

// Stats holds counters describing cache effectiveness.
type Stats struct {
	Hits      uint64
	Misses    uint64
	Evictions uint64
}

// LRU is a fixed-size, thread-safe least-recently-used cache with optional TTL.
type LRU[K comparable, V any] struct {
	mu       sync.Mutex
	capacity int
	ttl      time.Duration
	ll       *list.List
	items    map[K]*list.Element
	onEvict  EvictCallback[K, V]
	stats    Stats
	now      func() time.Time
}

// Option configures an LRU cache.
type Option[K comparable, V any] func(*LRU[K, V])

// WithTTL sets a time-to-live applied to every entry.
func WithTTL[K comparable, V any](ttl time.Duration) Option[K, V] {
	return func(c *LRU[K, V]) { c.ttl = ttl }
}

// WithEvictCallback registers a function called when entries are evicted.
func WithEvictCallback[K comparable, V any](fn EvictCallback[K, V]) Option[K, V] {
	return func(c *LRU[K, V]) { c.onEvict = fn }
}

// WithClock overrides the time source, which is useful in tests.
func WithClock[K comparable, V any](now func() time.Time) Option[K, V] {
	return func(c *LRU[K, V]) { c.now = now }
}

// New creates an LRU cache holding at most capacity entries.
func New[K comparable, V any](capacity int, opts ...Option[K, V]) (*LRU[K, V], error) {
	if capacity <= 0 {
		return nil, ErrInvalidCapacity
	}
	c := &LRU[K, V]{
		capacity: capacity,
		ll:       list.New(),
		items:    make(map[K]*list.Element, capacity),
		now:      time.Now,
	}
	for _, opt := range opts {
		opt(c)
	}
	return c, nil
}

// Get returns the value for key and marks it as recently used.
func (c *LRU[K, V]) Get(key K) (V, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()

	var zero V
	elem, ok := c.items[key]
	if !ok {
		c.stats.Misses++
		return zero, false
	}
	ent := elem.Value.(*entry[K, V])
	if c.expired(ent) {
		c.removeElement(elem)
		c.stats.Misses++
		return zero, false
	}
	c.ll.MoveToFront(elem)
	c.stats.Hits++
	return ent.value, true
}

// Put inserts or updates a value. It reports whether an eviction occurred.
func (c *LRU[K, V]) Put(key K, value V) bool {
	c.mu.Lock()
	defer c.mu.Unlock()

	if elem, ok := c.items[key]; ok {
		ent := elem.Value.(*entry[K, V])
		ent.value = value
		ent.expiresAt = c.expiry()
		c.ll.MoveToFront(elem)
		return false
	}

	elem := c.ll.PushFront(&entry[K, V]{key: key, value: value, expiresAt: c.expiry()})
	c.items[key] = elem

	if c.ll.Len() > c.capacity {
		c.evictOldest()
		return true
	}
	return false
}

// Remove deletes key from the cache, reporting whether it was present.
func (c *LRU[K, V]) Remove(key K) bool {
	c.mu.Lock()
	defer c.mu.Unlock()

	elem, ok := c.items[key]
	if !ok {
		return false
	}
	c.removeElement(elem)
	return true
}

// Len returns the number of entries, including any that have expired but not yet been purged.
func (c *LRU[K, V]) Len() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.ll.Len()
}

// Keys returns keys ordered from most to least recently used.
func (c *LRU[K, V]) Keys() []K {
	c.mu.Lock()
	defer c.mu.Unlock()

	keys := make([]K, 0, c.ll.Len())
	for elem := c.ll.Front(); elem != nil; elem = elem.Next() {
		keys = append(keys, elem.Value.(*entry[K, V]).key)
	}
	return keys
}

// Purge removes all entries without invoking the eviction callback.
func (c *LRU[K, V]) Purge() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.ll.Init()
	c.items = make(map[K]*list.Element, c.capacity)
}

// Stats returns a snapshot of the hit/miss counters.
func (c *LRU[K, V]) Stats() Stats {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.stats
}

func (c *LRU[K, V]) expiry() time.Time {
	if c.ttl <= 0 {
		return time.Time{}
	}
	return c.now().Add(c.ttl)
}

func (c *LRU[K, V]) expired(ent *entry[K, V]) bool {
	return !ent.expiresAt.IsZero() && c.now().After(ent.expiresAt)
}

func (c *LRU[K, V]) evictOldest() {
	elem := c.ll.Back()
	if elem == nil {
		return
	}
	ent := c.removeElement(elem)
	c.stats.Evictions++
	if c.onEvict != nil {
		c.onEvict(ent.key, ent.value)
	}
}

func (c *LRU[K, V]) removeElement(elem *list.Element) *entry[K, V] {
	c.ll.Remove(elem)
	ent := elem.Value.(*entry[K, V])
	delete(c.items, ent.key)
	return ent
}
