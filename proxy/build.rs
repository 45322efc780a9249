//! Link flags of the gate's binary.
//!
//! Packed relative relocations (`-z pack-relative-relocs`, DT_RELR; GNU ld ≥ 2.38, glibc ≥
//! 2.36, both in the bookworm the images are built from): the binary is position-independent,
//! and its ~55k relative relocations, stored as 24-byte `.rela.dyn` entries, took 1.3 MB the
//! loader reads at every start, pages that then stayed in each gate's RSS. Packed, they are a
//! few KiB of bitmaps. Only the `fleetgate-proxy` binary is linked this way.

fn main() {
    let target = std::env::var("TARGET").unwrap_or_default();
    if target.ends_with("-linux-gnu") {
        println!("cargo:rustc-link-arg-bins=-Wl,-z,pack-relative-relocs");
    }
    println!("cargo:rerun-if-changed=build.rs");
}
