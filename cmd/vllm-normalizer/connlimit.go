package main

import (
	"net"
	"net/http"
	"sync"
	"time"
)

// connLimiter bounds the connections of one http.Server's listeners. At the
// cap, a new connection closes the connection that has been idle longest
// (a keep-alive connection between requests) instead of waiting behind it:
// idle clients must not keep a router's request out. Only when no
// connection is idle does the new one wait, as with netutil.LimitListener.
// trackIdle must be the server's ConnState hook.
type connLimiter struct {
	max  int
	mu   sync.Mutex
	cond *sync.Cond
	open int
	// idle are the idle connections, oldest first.
	idle []*limitedConn
}

func newConnLimiter(limit int) *connLimiter {
	l := &connLimiter{max: limit}
	l.cond = sync.NewCond(&l.mu)
	return l
}

// Listener bounds ln by the limiter's cap, shared with its other listeners.
func (l *connLimiter) Listener(ln net.Listener) net.Listener {
	return &limitedListener{Listener: ln, l: l}
}

type limitedListener struct {
	net.Listener
	l *connLimiter
}

// Accept takes the next connection, then makes room for it: a slot if one
// is free, else the longest-idle connection's, else it waits for one.
func (ll *limitedListener) Accept() (net.Conn, error) {
	c, err := ll.Listener.Accept()
	if err != nil {
		return nil, err
	}
	l := ll.l
	l.mu.Lock()
	for l.open >= l.max {
		if len(l.idle) == 0 {
			l.cond.Wait()
			continue
		}
		victim := l.idle[0]
		l.removeIdleLocked(victim)
		l.releaseLocked(victim)
		// Closed outside the lock; its server goroutine sees the close
		// and ends (its own Close then releases nothing twice).
		defer victim.Conn.Close()
	}
	l.open++
	l.mu.Unlock()
	return &limitedConn{Conn: c, l: l}, nil
}

type limitedConn struct {
	net.Conn
	l        *connLimiter
	released bool // guarded by l.mu
	idle     bool // in l.idle; guarded by l.mu
}

func (c *limitedConn) Close() error {
	c.l.mu.Lock()
	c.l.removeIdleLocked(c)
	c.l.releaseLocked(c)
	c.l.mu.Unlock()
	return c.Conn.Close()
}

func (l *connLimiter) releaseLocked(c *limitedConn) {
	if c.released {
		return
	}
	c.released = true
	l.open--
	l.cond.Signal()
}

func (l *connLimiter) removeIdleLocked(c *limitedConn) {
	if !c.idle {
		return
	}
	c.idle = false
	for i, o := range l.idle {
		if o == c {
			l.idle = append(l.idle[:i], l.idle[i+1:]...)
			return
		}
	}
}

// trackIdle tracks which limited connections are idle, for
// http.Server.ConnState.
func trackIdle(nc net.Conn, st http.ConnState) {
	c := unwrapLimited(nc)
	if c == nil {
		return
	}
	l := c.l
	l.mu.Lock()
	defer l.mu.Unlock()
	switch st {
	case http.StateIdle:
		if !c.released && !c.idle {
			c.idle = true
			l.idle = append(l.idle, c)
			// An Accept waiting at the cap can now make room.
			l.cond.Broadcast()
		}
	default:
		l.removeIdleLocked(c)
	}
}

// unwrapLimited finds the limitedConn under a TLS connection.
func unwrapLimited(nc net.Conn) *limitedConn {
	for range 4 {
		switch c := nc.(type) {
		case *limitedConn:
			return c
		case interface{ NetConn() net.Conn }:
			nc = c.NetConn()
		default:
			return nil
		}
	}
	return nil
}

// idleTimeout is how long a router-facing listener keeps a keep-alive
// connection between requests: no longer than its write timeout, so that
// a client that took its page and went quiet (the page fitted in the
// kernel's send buffer, so the write timeout never fired) lets its
// connection and goroutine go within write timeout + idle timeout.
func idleTimeout(writeTimeout time.Duration) time.Duration {
	const most = 2 * time.Minute
	if writeTimeout > 0 && writeTimeout < most {
		return writeTimeout
	}
	return most
}
