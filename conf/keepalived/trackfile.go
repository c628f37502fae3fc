package keepalived

import (
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/dplb/dplb/conf"
)

// trackFile is a track_file block (vrrp_track_file, its older name): the
// file a FILE_CHECK reads and the weight it multiplies the file's number
// by.
type trackFile struct {
	n       *Node
	file    string
	weight  int
	reverse bool
	init    *Node // init_file, which lbd does not do
}

// readTrackFiles reads every track_file block, before the services whose
// FILE_CHECKs name them.
func (c *converter) readTrackFiles(nodes []*Node) {
	for _, n := range nodes {
		if kw := n.Keyword(); kw != "track_file" && kw != "vrrp_track_file" {
			continue
		}
		name := firstArg(n.Args())
		if name == "" {
			c.warn(n, "a track_file without a name: dropped")
			continue
		}
		tf := trackFile{n: n, weight: 1} // keepalived's default weight
		for _, s := range n.Block {
			switch s.Keyword() {
			case "file":
				tf.file = firstArg(s.Args())
			case "weight":
				if w, rev, ok := c.fileWeight(s); ok {
					tf.weight, tf.reverse = w, rev
				}
			case "init_file":
				tf.init = s
			default:
				c.warn(s, "unknown keyword: dropped")
			}
		}
		if c.trackFiles == nil {
			c.trackFiles = map[string]trackFile{}
		}
		c.trackFiles[name] = tf
	}
}

// fileWeight reads "weight N [reverse|noreverse]" of a track_file or a
// FILE_CHECK.
func (c *converter) fileWeight(s *Node) (weight int, reverse, ok bool) {
	a := s.Args()
	w, err := strconv.Atoi(firstArg(a))
	if err != nil || w < -conf.MaxFileWeight || w > conf.MaxFileWeight {
		c.warn(s, "%q is not a weight in -%d..%d: dropped", firstArg(a), conf.MaxFileWeight, conf.MaxFileWeight)
		return 0, false, false
	}
	if len(a) > 1 {
		switch a[1] {
		case "reverse":
			reverse = true
		case "noreverse":
		default:
			c.warn(s, "%q is not reverse or noreverse: the weight dropped", a[1])
			return 0, false, false
		}
	}
	return w, reverse, true
}

// fileCheck converts a FILE_CHECK: a file check of the track_file it
// names, polled every second. keepalived watches the file with inotify
// and acts at once; a FILE_CHECK has none of the other checkers'
// settings (delay_loop, retry, alpha), so none is inherited.
func (c *converter) fileCheck(n *Node) (conf.HealthCheck, bool) {
	h := conf.DefaultHealthCheck()
	h.Type = conf.HealthFile
	h.Interval, h.Timeout, h.Rise, h.Fall = time.Second, 500*time.Millisecond, 1, 1
	var tf *trackFile
	var weight *Node
	for _, s := range n.Block {
		switch s.Keyword() {
		case "track_file":
			name := firstArg(s.Args())
			t, ok := c.trackFiles[name]
			if !ok {
				c.warn(s, "no track_file %q: the server is left unchecked (type none)", name)
				return h, false
			}
			tf = &t
		case "weight":
			weight = s
		case "dynamic":
			// lbd adds a weighted file's number to the server's weight.
		default:
			c.warn(s, "unknown keyword: dropped")
		}
	}
	if tf == nil {
		c.warn(n, "a FILE_CHECK without a track_file: the server is left unchecked (type none)")
		return h, false
	}
	if tf.file == "" || !filepath.IsAbs(tf.file) || strings.HasSuffix(tf.file, "/") {
		c.warn(tf.n, "file %q is not an absolute path: the servers whose FILE_CHECK tracks it are left unchecked (type none)", tf.file)
		return h, false
	}
	// init_file with no value, or 0, and no overwrite writes a 0 where
	// there is no file: what lbd reads there anyway.
	if a := initArgs(tf.init); len(a) > 1 || len(a) == 1 && a[0] != "0" {
		c.warn(tf.init, "lbd does not write the file: create it before lbd starts (an absent file reads 0): dropped")
	}
	h.File, h.FileWeight, h.FileReverse = tf.file, tf.weight, tf.reverse
	// A FILE_CHECK's own weight, if not 0, replaces the track_file's.
	if weight != nil {
		if w, rev, ok := c.fileWeight(weight); ok && w != 0 {
			h.FileWeight, h.FileReverse = w, rev
		}
	}
	return h, true
}

// initArgs are init_file's words, none without one.
func initArgs(n *Node) []string {
	if n == nil {
		return nil
	}
	return n.Args()
}
