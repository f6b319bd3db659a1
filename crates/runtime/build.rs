//! The runtime's shared object names itself (DT_SONAME): a program built by
//! `memlens cc` needs `libmemlens_runtime.so`, and a runtime of that name
//! preloaded by `memlens record` (from another install, or the embedded
//! copy in the cache) then satisfies the need. Without the name, ld.so loaded
//! the program's own copy beside the preloaded one: two runtimes in one
//! process, each with a log, the second's counts zero.
fn main() {
    println!("cargo:rustc-cdylib-link-arg=-Wl,-soname,libmemlens_runtime.so");
}
