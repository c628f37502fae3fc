// Package deploy holds what runs dplb outside the repository: the Debian
// package's files (debian/, built by scripts/deb.sh), and the Grafana
// dashboard and Prometheus alert rules (observability/). Its tests build
// the package and check what the others name against lbd.
package deploy
