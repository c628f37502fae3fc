// Package memiftest holds tests that need memif ports of their own in a
// separate EAL: a memif peer that connects and disconnects while a thread
// polls (the burst guard of package ethdev).
package memiftest
