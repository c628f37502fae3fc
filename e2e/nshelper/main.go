// Command nshelper is the client and server that end-to-end tests and the
// demo run inside network namespaces.
//
//	nshelper serve -listen :8080[,:21] -name rs1
//	    HTTP server: every request is answered with the body
//	    "rs1 <client ip:port as seen by the server>" and the connection is
//	    closed. Prints "ready <addr>" per listener once it accepts.
//	    -proxy-protocol: connections start with a PROXY v2 header (from a
//	    FullNAT director); the address answered is the header's client.
//	nshelper get -url http://192.0.2.100/ -n 200 -timeout 5s
//	    N sequential requests, each on a new TCP connection, no retries.
//	    One JSON line per request, then one summary line; exit status 1 if
//	    any request failed.
//	nshelper udpserve -listen :5353[,:53] -name rs1 [-v]
//	    UDP server: every datagram is answered with "rs1 <client ip:port
//	    as seen>", from the address it was sent to. Prints "ready <addr>"
//	    per listener; -v also prints "rx <from> <to> <payload>" per datagram.
//	nshelper dnsserve -listen :53 [-addr 192.0.2.53]
//	    DNS server: every query gets NOERROR (an A query the answer -addr),
//	    names under "nxdomain." NXDOMAIN. Prints "ready <addr>".
//	nshelper smtpserve -listen :25 [-name mx] [-code 220]
//	    SMTP server: greets with -code, answers HELO and EHLO with 250 and
//	    QUIT with 221. Prints "ready <addr>".
//	nshelper udpget -addr 192.0.2.100:53 -n 100 -timeout 2s [-bind IP]
//	    N queries, each from a new socket (a new source port), no retries.
//	    Output as get's; "remote" is the source of the answer.
//	nshelper decap -dev eth0 -tun dplbtun0 -vip 192.0.2.100
//	    User-space IPIP decapsulator of a VS/TUN real server: creates the
//	    TUN device with the VIP/32, prints "ready ...", then writes the
//	    inner packet of every IPIP packet that arrives on -dev into it.
//	    SIGUSR1 and exit print "stats frames=N decap=N bad=N errors=N".
//	nshelper toa -dev eth0 -port 8080
//	    Prints the TCP option address (DPVS's TOA) of every TCP segment to
//	    the port that arrives on -dev, as a real server's toa module reads
//	    it: "toa CLIENT:PORT from SRC:SPORT flags F", after "ready".
//	nshelper uoa -dev eth0 -port 5353
//	    Prints the UDP option of address (DPVS's UOA) of every datagram to
//	    the port that arrives on -dev, as an IPv4 option or in an option
//	    protocol header: "uoa CLIENT:PORT from SRC:SPORT mode ipo|opp len N".
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptrace"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"
)

// Result is one request's outcome, printed as one JSON line by get.
type Result struct {
	I      int    `json:"i"`                // 0-based request number
	Body   string `json:"body,omitempty"`   // response body, trimmed
	Status int    `json:"status,omitempty"` // HTTP status code
	Remote string `json:"remote,omitempty"` // remote address of the TCP connection
	Local  string `json:"local,omitempty"`  // local address of the TCP connection
	Err    string `json:"err,omitempty"`    // empty on success
	Millis int64  `json:"ms"`               // duration of the request
}

// Summary is the last line printed by get.
type Summary struct {
	Summary bool `json:"summary"` // always true
	OK      int  `json:"ok"`
	Failed  int  `json:"failed"`
}

func main() {
	if len(os.Args) < 2 {
		usage()
	}
	var err error
	switch os.Args[1] {
	case "serve":
		err = serve(os.Args[2:])
	case "echo":
		err = echoServe(os.Args[2:])
	case "conns":
		var failed bool
		failed, err = conns(os.Args[2:], os.Stdout)
		if err == nil && failed {
			os.Exit(1)
		}
	case "get":
		var failed bool
		failed, err = get(os.Args[2:], os.Stdout)
		if err == nil && failed {
			os.Exit(1)
		}
	case "udpserve":
		err = udpserve(os.Args[2:])
	case "dnsserve":
		err = dnsserve(os.Args[2:])
	case "smtpserve":
		err = smtpserve(os.Args[2:])
	case "udpget":
		var failed bool
		failed, err = udpget(os.Args[2:], os.Stdout)
		if err == nil && failed {
			os.Exit(1)
		}
	case "decap":
		err = decap(os.Args[2:])
	case "toa":
		err = toaWatch(os.Args[2:])
	case "uoa":
		err = uoaWatch(os.Args[2:])
	default:
		usage()
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "nshelper:", err)
		os.Exit(2)
	}
}

func usage() {
	fmt.Fprintln(os.Stderr, "usage: nshelper serve -listen :8080[,:21] -name NAME | get -url URL -n N -timeout D |\n"+
		"  udpserve -listen :5353 -name NAME [-v] | udpget -addr IP:PORT -n N -timeout D [-bind IP] |\n"+
		"  dnsserve -listen :53 [-addr IP] | smtpserve -listen :25 [-name N] [-code 220] |\n"+
		"  decap -dev IF -tun NAME -vip IP | echo -listen :9000 -name NAME |\n"+
		"  conns -addr IP:PORT -n N -parallel P -msgs K | toa -dev IF -port P |\n"+
		"  uoa -dev IF -port P")
	os.Exit(2)
}

func serve(args []string) error {
	fs := flag.NewFlagSet("serve", flag.ContinueOnError)
	listen := fs.String("listen", ":8080", "comma-separated listen addresses")
	name := fs.String("name", "", "name put at the start of every answer")
	failFile := fs.String("fail-file", "", "while this file exists, answer 500 (a sick application)")
	failPath := fs.String("fail-path", "", "with -fail-file: answer 500 for this path only (one sick page)")
	proxy := fs.Bool("proxy-protocol", false, "every connection starts with a PROXY v2 header: answer with its client address")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *name == "" {
		h, _ := os.Hostname()
		*name = h
	}
	handler := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Connection", "close")
		w.Header().Set("Content-Type", "text/plain")
		if *failFile != "" && (*failPath == "" || r.URL.Path == *failPath) {
			if _, err := os.Stat(*failFile); err == nil {
				w.WriteHeader(http.StatusInternalServerError)
			}
		}
		fmt.Fprintf(w, "%s %s\n", *name, r.RemoteAddr)
	})
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	errc := make(chan error, 1)
	var servers []*http.Server
	for _, addr := range strings.Split(*listen, ",") {
		ln, err := net.Listen(family("tcp", addr), addr)
		if err != nil {
			return err
		}
		if *proxy {
			ln = proxyListener{ln}
		}
		srv := &http.Server{Handler: handler, ReadHeaderTimeout: 10 * time.Second}
		srv.SetKeepAlivesEnabled(false)
		servers = append(servers, srv)
		fmt.Printf("ready %s\n", ln.Addr())
		go func() { errc <- srv.Serve(ln) }()
	}
	select {
	case <-ctx.Done():
	case err := <-errc:
		return err
	}
	for _, srv := range servers {
		sctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		_ = srv.Shutdown(sctx)
		cancel()
	}
	return nil
}

func get(args []string, out io.Writer) (failed bool, err error) {
	fs := flag.NewFlagSet("get", flag.ContinueOnError)
	url := fs.String("url", "http://192.0.2.100/", "URL to fetch")
	n := fs.Int("n", 1, "number of requests")
	timeout := fs.Duration("timeout", 5*time.Second, "timeout of each request")
	if err := fs.Parse(args); err != nil {
		return false, err
	}
	tr := &http.Transport{
		DisableKeepAlives: true,
		Proxy:             nil,
		DialContext:       (&net.Dialer{Timeout: *timeout}).DialContext,
	}
	client := &http.Client{Transport: tr, Timeout: *timeout}
	enc := json.NewEncoder(out)
	var sum Summary
	sum.Summary = true
	for i := 0; i < *n; i++ {
		res := fetch(client, *url, i)
		if res.Err == "" {
			sum.OK++
		} else {
			sum.Failed++
		}
		if err := enc.Encode(res); err != nil {
			return true, err
		}
	}
	if err := enc.Encode(sum); err != nil {
		return true, err
	}
	return sum.Failed > 0, nil
}

func fetch(client *http.Client, url string, i int) (res Result) {
	res.I = i
	start := time.Now()
	defer func() { res.Millis = time.Since(start).Milliseconds() }()
	trace := &httptrace.ClientTrace{
		GotConn: func(info httptrace.GotConnInfo) {
			res.Remote = info.Conn.RemoteAddr().String()
			res.Local = info.Conn.LocalAddr().String()
		},
	}
	req, err := http.NewRequestWithContext(httptrace.WithClientTrace(context.Background(), trace), http.MethodGet, url, nil)
	if err != nil {
		res.Err = err.Error()
		return res
	}
	resp, err := client.Do(req)
	if err != nil {
		res.Err = err.Error()
		return res
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	res.Status = resp.StatusCode
	res.Body = strings.TrimSpace(string(body))
	if err != nil {
		res.Err = err.Error()
	} else if resp.StatusCode != http.StatusOK {
		res.Err = errors.New(resp.Status).Error()
	}
	return res
}

// family is network ("tcp", "udp") for IPv4 only, the tests' default,
// or for both when addr's host is IPv6 in brackets ("[::]:8080").
func family(network, addr string) string {
	if strings.HasPrefix(addr, "[") {
		return network
	}
	return network + "4"
}
