package main

import (
	"bufio"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net"
	"os"
	"os/signal"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

// echoServe answers every line on a TCP connection with the server's name,
// so a client can tell whether all of a connection's messages reached the
// same real server.
func echoServe(args []string) error {
	fs := flag.NewFlagSet("echo", flag.ContinueOnError)
	listen := fs.String("listen", ":9000", "listen address")
	name := fs.String("name", "", "name sent back for every line")
	if err := fs.Parse(args); err != nil {
		return err
	}
	ln, err := net.Listen("tcp4", *listen)
	if err != nil {
		return err
	}
	fmt.Printf("ready %s\n", ln.Addr())
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, os.Interrupt, syscall.SIGTERM)
	go func() { <-sig; ln.Close() }()
	for {
		c, err := ln.Accept()
		if err != nil {
			return nil
		}
		go func() {
			defer c.Close()
			r := bufio.NewReader(c)
			for {
				if _, err := r.ReadString('\n'); err != nil {
					return
				}
				if _, err := io.WriteString(c, *name+"\n"); err != nil {
					return
				}
			}
		}()
	}
}

// ConnsSummary is what "conns" prints.
type ConnsSummary struct {
	OK            int            `json:"ok"`
	Failed        int            `json:"failed"`
	Split         int            `json:"split"` // connections whose answers came from more than one server
	Servers       map[string]int `json:"servers"`
	MaxConcurrent int64          `json:"max_concurrent"`
	FirstError    string         `json:"first_error,omitempty"`
}

// conns opens n TCP connections, at most parallel at a time, sends msgs
// lines on each with a pause between them (so that many are open at
// once), and checks that one server answered all of a connection's lines.
func conns(args []string, out io.Writer) (failed bool, err error) {
	fs := flag.NewFlagSet("conns", flag.ContinueOnError)
	addr := fs.String("addr", "192.0.2.100:9000", "address to connect to")
	n := fs.Int("n", 1000, "connections in all")
	parallel := fs.Int("parallel", 200, "connections open at once at most")
	msgs := fs.Int("msgs", 3, "lines sent on each connection")
	pause := fs.Duration("pause", 100*time.Millisecond, "pause between lines")
	timeout := fs.Duration("timeout", 10*time.Second, "timeout of each step")
	if err := fs.Parse(args); err != nil {
		return false, err
	}
	sum := ConnsSummary{Servers: map[string]int{}}
	var mu sync.Mutex
	var open, maxOpen atomic.Int64
	sem := make(chan struct{}, *parallel)
	var wg sync.WaitGroup
	for i := 0; i < *n; i++ {
		sem <- struct{}{}
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			server, err := oneConn(*addr, *msgs, *pause, *timeout, &open, &maxOpen)
			mu.Lock()
			defer mu.Unlock()
			switch {
			case err != nil:
				sum.Failed++
				if sum.FirstError == "" {
					sum.FirstError = err.Error()
				}
			case server == "":
				sum.Split++
			default:
				sum.OK++
				sum.Servers[server]++
			}
		}()
	}
	wg.Wait()
	sum.MaxConcurrent = maxOpen.Load()
	if err := json.NewEncoder(out).Encode(sum); err != nil {
		return true, err
	}
	return sum.Failed+sum.Split > 0, nil
}

// oneConn returns the server that answered every line, or "" if several did.
func oneConn(addr string, msgs int, pause, timeout time.Duration, open, maxOpen *atomic.Int64) (string, error) {
	c, err := net.DialTimeout("tcp4", addr, timeout)
	if err != nil {
		return "", err
	}
	defer c.Close()
	if o := open.Add(1); o > maxOpen.Load() {
		maxOpen.Store(o) // a racy max is fine for a report
	}
	defer open.Add(-1)
	r := bufio.NewReader(c)
	first := ""
	for i := 0; i < msgs; i++ {
		if i > 0 {
			time.Sleep(pause)
		}
		c.SetDeadline(time.Now().Add(timeout))
		if _, err := fmt.Fprintf(c, "hello %d\n", i); err != nil {
			return "", err
		}
		line, err := r.ReadString('\n')
		if err != nil {
			return "", err
		}
		name := strings.TrimSpace(line)
		if first == "" {
			first = name
		} else if name != first {
			return "", nil
		}
	}
	return first, nil
}
