package redisstore

import (
	"context"
	"net/url"
	"strconv"
	"time"

	"github.com/gocolly/colly/v2/storage"
	"github.com/redis/go-redis/v9"
)

// CollyStorage is Colly's storage.Storage in Redis, beside the Store's pacing state and frontier: the
// visited set and the cookies of every collector of the fleet, so that a URL one process visited is
// visited for all (what gocolly/redisstorage does, on this Store's client and prefix). Install it with
// c.SetStorage(st.CollyStorage()).
//
// Keys: <prefix>colly:visited (a set of Colly's request hashes, in decimal) and
// <prefix>colly:cookies:<host> (the host's cookies as Colly stringifies them). Neither expires.
// Colly's interface has no context: each call is bounded by collyTimeout. A Cookies or SetCookies that
// fails reads as no cookie, or is dropped; a visited check that fails returns its error, and Colly
// does not send the request.
type CollyStorage struct {
	c      redis.UniversalClient
	prefix string
}

var _ storage.Storage = (*CollyStorage)(nil)

// collyTimeout bounds each call of CollyStorage, which Colly makes without a context.
const collyTimeout = 2 * time.Second

// CollyStorage returns Colly's storage on the Store's client and prefix.
func (s *Store) CollyStorage() *CollyStorage {
	return &CollyStorage{c: s.c, prefix: s.prefix}
}

func (cs *CollyStorage) visitedKey() string            { return cs.prefix + "colly:visited" }
func (cs *CollyStorage) cookiesKey(host string) string { return cs.prefix + "colly:cookies:" + host }

// Init implements storage.Storage: it checks that the server answers.
func (cs *CollyStorage) Init() error {
	ctx, cancel := context.WithTimeout(context.Background(), collyTimeout)
	defer cancel()
	if err := cs.c.Ping(ctx).Err(); err != nil {
		return wrapErr(err, "colly storage: ping")
	}
	return nil
}

// Visited implements storage.Storage.
func (cs *CollyStorage) Visited(requestID uint64) error {
	ctx, cancel := context.WithTimeout(context.Background(), collyTimeout)
	defer cancel()
	if err := cs.c.SAdd(ctx, cs.visitedKey(), strconv.FormatUint(requestID, 10)).Err(); err != nil {
		return wrapErr(err, "colly storage: mark visited")
	}
	return nil
}

// IsVisited implements storage.Storage.
func (cs *CollyStorage) IsVisited(requestID uint64) (bool, error) {
	ctx, cancel := context.WithTimeout(context.Background(), collyTimeout)
	defer cancel()
	ok, err := cs.c.SIsMember(ctx, cs.visitedKey(), strconv.FormatUint(requestID, 10)).Result()
	if err != nil {
		return false, wrapErr(err, "colly storage: is visited")
	}
	return ok, nil
}

// Cookies implements storage.Storage.
func (cs *CollyStorage) Cookies(u *url.URL) string {
	ctx, cancel := context.WithTimeout(context.Background(), collyTimeout)
	defer cancel()
	v, _ := cs.c.Get(ctx, cs.cookiesKey(u.Host)).Result()
	return v
}

// SetCookies implements storage.Storage.
func (cs *CollyStorage) SetCookies(u *url.URL, cookies string) {
	ctx, cancel := context.WithTimeout(context.Background(), collyTimeout)
	defer cancel()
	_ = cs.c.Set(ctx, cs.cookiesKey(u.Host), cookies, 0).Err()
}
