// Package docker holds the container image's build (build.sh, rootfs.sh,
// Dockerfile) and its tests: the image needs no registry, its base is made
// from Debian's packages with debootstrap.
package docker
