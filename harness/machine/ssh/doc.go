// Package ssh is the client side of the harness's board target: a real
// riscv64, arm64 or ppc64le board reached over SSH for hours-long soaks.
//
// It dials with a strict host key policy (known_hosts, or an explicit and
// loudly logged opt-out), runs commands over plain exec sessions so that
// minimal sshds without SFTP work, notices a dead board through keepalives
// even when no data flows, and tells a reboot (a crash) from a network blip by
// comparing the kernel's boot_id across reconnects.
package ssh
