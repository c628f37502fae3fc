package api_test

import (
	"context"
	"os"
	"os/user"
	"strconv"
	"testing"

	"github.com/dplb/dplb/ctl/api"
)

// TestServerNamesPeer: the handler learns the peer's Unix user from
// SO_PEERCRED, by name.
func TestServerNamesPeer(t *testing.T) {
	seen := make(chan api.Author, 1)
	path := serve(t, api.HandlerFunc(func(ctx context.Context, req api.Request) api.Response {
		a, ok := api.AuthorOf(ctx)
		if !ok {
			a = api.Author{User: "(none)"}
		}
		seen <- a
		return api.Response{}
	}))
	if _, err := api.Call(context.Background(), path, api.Request{Op: api.OpList}); err != nil {
		t.Fatal(err)
	}
	want := "uid " + strconv.Itoa(os.Getuid())
	if u, err := user.LookupId(strconv.Itoa(os.Getuid())); err == nil {
		want = u.Username
	}
	if a := <-seen; a.User != want || a.Via != api.ViaSocket {
		t.Fatalf("author %+v, want user %q via %q", a, want, api.ViaSocket)
	}
}
