package main

import (
	"bufio"
	"context"
	"flag"
	"fmt"
	"net"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// smtpserve is a small SMTP server for the health checks' tests: it greets
// with -code (220, or another to refuse service), answers HELO and EHLO
// with 250, QUIT with 221 and closes, anything else with 502.
func smtpserve(args []string) error {
	fs := flag.NewFlagSet("smtpserve", flag.ContinueOnError)
	listen := fs.String("listen", ":25", "TCP listen address")
	name := fs.String("name", "mx", "the name in the greeting")
	code := fs.Int("code", 220, "the greeting's code")
	if err := fs.Parse(args); err != nil {
		return err
	}
	ln, err := net.Listen("tcp", *listen)
	if err != nil {
		return err
	}
	defer ln.Close()
	fmt.Printf("ready %s\n", ln.Addr())
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	go func() { <-ctx.Done(); ln.Close() }()
	greeting := strconv.Itoa(*code) + " " + *name + " ESMTP\r\n"
	for {
		c, err := ln.Accept()
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			return err
		}
		go smtpSession(c, greeting, *name)
	}
}

// smtpSession talks to one client until it says QUIT or goes.
func smtpSession(c net.Conn, greeting, name string) {
	defer c.Close()
	c.SetDeadline(time.Now().Add(30 * time.Second))
	c.Write([]byte(greeting))
	r := bufio.NewReader(c)
	for {
		line, err := r.ReadString('\n')
		if err != nil {
			return
		}
		verb := strings.ToUpper(strings.Fields(line + " x")[0])
		switch verb {
		case "HELO", "EHLO":
			c.Write([]byte("250 " + name + "\r\n"))
		case "QUIT":
			c.Write([]byte("221 bye\r\n"))
			return
		default:
			c.Write([]byte("502 command not implemented\r\n"))
		}
	}
}
