package conf_test

import (
	"errors"
	"testing"
	"time"

	"github.com/dplb/dplb/conf"
)

func TestSyncValid(t *testing.T) {
	for _, tc := range []struct {
		name string
		edit func(*conf.Sync)
	}{
		{"off, no key", func(*conf.Sync) {}},
		{"multicast master", func(s *conf.Sync) { s.Master, s.McastInterface, s.KeyFile = true, "eth1", "/etc/dplb/sync.key" }},
		{"unicast both", func(s *conf.Sync) {
			s.Master, s.Backup, s.Peers, s.Listen, s.KeyFile = true, true, []string{"192.0.2.2"}, "192.0.2.1", "/k"
		}},
		{"period 0, threshold any", func(s *conf.Sync) { s.Period, s.Threshold = 0, 100 }},
		{"edges", func(s *conf.Sync) { s.SyncID, s.Port, s.RefreshPeriod = 255, 65535, 720*time.Hour }},
	} {
		c := validConfig()
		tc.edit(&c.Sync)
		if err := c.Validate(schedulers); err != nil {
			t.Errorf("%s: %v", tc.name, err)
		}
	}
}

func TestSyncInvalid(t *testing.T) {
	for _, tc := range []struct {
		field string
		edit  func(*conf.Sync)
	}{
		{"sync.key_file", func(s *conf.Sync) { s.Master, s.McastInterface = true, "eth1" }},
		{"sync.key_file", func(s *conf.Sync) { s.KeyFile = "relative/key" }},
		{"sync.mcast_interface", func(s *conf.Sync) { s.Backup, s.KeyFile = true, "/k" }},
		{"sync.mcast_interface", func(s *conf.Sync) { s.McastInterface = "a/b" }},
		{"sync.mcast_interface", func(s *conf.Sync) { s.McastInterface = "much-too-long-name" }},
		{"sync.mcast_group", func(s *conf.Sync) { s.McastGroup = "192.0.2.1" }},
		{"sync.mcast_group", func(s *conf.Sync) { s.McastGroup = "ff02::1" }},
		{"sync.peers[1]", func(s *conf.Sync) { s.Peers = []string{"192.0.2.2", "nope"} }},
		{"sync.peers[1]", func(s *conf.Sync) { s.Peers = []string{"192.0.2.2", "192.0.2.2"} }},
		{"sync.peers[0]", func(s *conf.Sync) { s.Peers = []string{"224.0.0.81"} }},
		{"sync.listen", func(s *conf.Sync) { s.Listen = "::1" }},
		{"sync.port", func(s *conf.Sync) { s.Port = 0 }},
		{"sync.syncid", func(s *conf.Sync) { s.SyncID = 256 }},
		{"sync.threshold", func(s *conf.Sync) { s.Threshold = -1 }},
		{"sync.threshold", func(s *conf.Sync) { s.Threshold = 50 }},
		{"sync.period", func(s *conf.Sync) { s.Period = 2000000 }},
		{"sync.refresh_period", func(s *conf.Sync) { s.RefreshPeriod = -time.Second }},
		{"sync.peer_dead_after", func(s *conf.Sync) { s.PeerDeadAfter = time.Second }},
		{"sync.peer_dead_after", func(s *conf.Sync) { s.PeerDeadAfter = -time.Second }},
		{"sync.peer_dead_after", func(s *conf.Sync) { s.PeerDeadAfter = 2 * time.Hour }},
	} {
		c := validConfig()
		tc.edit(&c.Sync)
		err := c.Validate(schedulers)
		var fe *conf.FieldError
		if !errors.As(err, &fe) || fe.Field != tc.field {
			t.Errorf("%s: got %v", tc.field, err)
		}
	}
}
