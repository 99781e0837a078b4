//! Plugins written by hand in WAT, for attacks a language toolchain would not let a plugin make:
//! answers whose lists hold many entries that all point at one large string in the plugin's
//! memory. Each entry costs the plugin 8 bytes; copied into the host, each costs the whole
//! string. The core module is wrapped into a component of the contract by `wit-component`.
//!
//! The module is written against contract 0.1.0 and wrapped with that version's frozen WIT, so
//! it stays a 0.1.0 plugin when newer versions come: with nothing amplified, it is the plugin
//! that shows a host still runs plugins built against 0.1.0.

use std::path::Path;

/// Bytes of the one string every amplified entry points at.
pub const BIG: u32 = 1 << 20;

/// How a WAT plugin answers.
pub struct Amplify {
    /// Entries of `metadata.creates`, all but the first naming [`BIG`] as their kind (1 is an
    /// honest ConfigMap).
    pub kinds: u32,
    /// Entries of `validate-config`'s error list, path and message each [`BIG`] (0 is valid).
    pub config_errors: u32,
    /// Objects `translate` returns for its one service, each [`BIG`].
    pub objects: u32,
}

/// The component for `amplify`.
pub fn component(amplify: &Amplify) -> Vec<u8> {
    let mut module = wat::parse_str(core_module(amplify)).expect("the WAT parses");
    let mut resolve = wit_parser::Resolve::default();
    let wit = Path::new(env!("CARGO_MANIFEST_DIR")).join("../wit/since_v0.1.0");
    let (package, _) = resolve.push_dir(&wit).expect("the contract's WIT parses");
    let world = resolve.select_world(&[package], Some("adapter-plugin")).expect("the world exists");
    wit_component::embed_component_metadata(&mut module, &resolve, world, wit_component::StringEncoding::UTF8)
        .expect("embedding the contract");
    wit_component::ComponentEncoder::default()
        .module(&module)
        .expect("a core module")
        .validate(true)
        .encode()
        .expect("a component of the contract")
}

/// The core module. Memory layout: return areas at 16 and 128 (zeros: a `map-status` answer of
/// `deployed`), short strings at 256, the service translation at 512, the big string (zeros, valid
/// UTF-8) at 1 MiB, the lists at 2 MiB, and the bump allocator's heap from 3 MiB.
fn core_module(a: &Amplify) -> String {
    let Amplify { kinds, config_errors, objects } = a;
    let error_strings = config_errors * 2;
    format!(
        r#"(module
  (memory (export "memory") 64)
  (global $heap (mut i32) (i32.const 0x300000))
  (data (i32.const 256) "wat-amplify")
  (data (i32.const 272) "0.1.0")
  (data (i32.const 280) "v1")
  (data (i32.const 288) "ConfigMap")
  (data (i32.const 304) "configmaps")
  (data (i32.const 320) "svc")

  ;; Writes the pointer/length pair (ptr, len) at at + i * stride for i in 0..n.
  (func $fill (param $at i32) (param $n i32) (param $stride i32) (param $ptr i32) (param $len i32)
    (block $done
      (loop $next
        (br_if $done (i32.eqz (local.get $n)))
        (i32.store (local.get $at) (local.get $ptr))
        (i32.store offset=4 (local.get $at) (local.get $len))
        (local.set $at (i32.add (local.get $at) (local.get $stride)))
        (local.set $n (i32.sub (local.get $n) (i32.const 1)))
        (br $next))))

  (func (export "cabi_realloc") (param i32 i32 i32 i32) (result i32)
    (local $p i32)
    (local.set $p (i32.and (i32.add (global.get $heap) (i32.sub (local.get 2) (i32.const 1)))
                           (i32.sub (i32.const 0) (local.get 2))))
    (global.set $heap (i32.add (local.get $p) (local.get 3)))
    (local.get $p))

  ;; plugin-metadata: name, version, contract-version, creates, reads. An object-kind is 36
  ;; bytes: group, version, kind, plural, namespaced.
  (func (export "ksm:adapter/plugin@0.1.0#metadata") (result i32)
    (call $fill (i32.const 0x200000) (i32.const {kinds}) (i32.const 36) (i32.const 0) (i32.const 0))
    (call $fill (i32.const 0x200008) (i32.const {kinds}) (i32.const 36) (i32.const 280) (i32.const 2))
    (call $fill (i32.const 0x200010) (i32.const {kinds}) (i32.const 36) (i32.const 0x100000) (i32.const {BIG}))
    (call $fill (i32.const 0x200018) (i32.const {kinds}) (i32.const 36) (i32.const 304) (i32.const 10))
    (call $fill (i32.const 0x200010) (i32.const 1) (i32.const 36) (i32.const 288) (i32.const 9))
    (i32.store8 (i32.const 0x200020) (i32.const 1))
    (call $fill (i32.const 16) (i32.const 1) (i32.const 0) (i32.const 256) (i32.const 11))
    (call $fill (i32.const 24) (i32.const 1) (i32.const 0) (i32.const 272) (i32.const 5))
    (call $fill (i32.const 32) (i32.const 1) (i32.const 0) (i32.const 272) (i32.const 5))
    (call $fill (i32.const 40) (i32.const 1) (i32.const 0) (i32.const 0x200000) (i32.const {kinds}))
    (call $fill (i32.const 48) (i32.const 1) (i32.const 0) (i32.const 0) (i32.const 0))
    (i32.const 16))

  ;; result<_, list<config-error>>: a config-error is 16 bytes (path, message).
  (func (export "ksm:adapter/plugin@0.1.0#validate-config") (param i32 i32) (result i32)
    (call $fill (i32.const 0x210000) (i32.const {error_strings}) (i32.const 8) (i32.const 0x100000) (i32.const {BIG}))
    (i32.store8 (i32.const 16) (i32.ne (i32.const {config_errors}) (i32.const 0)))
    (call $fill (i32.const 20) (i32.const 1) (i32.const 0) (i32.const 0x210000) (i32.const {config_errors}))
    (i32.const 16))

  ;; result<list<service-translation>, translate-error> with one service-translation (32
  ;; bytes: service, outcome = ok(list<string>), claims).
  (func (export "ksm:adapter/plugin@0.1.0#translate")
    (param i32 i32 i32 i32 i32 i32 i32 i32 i32 i32 i32 i32 i32) (result i32)
    (call $fill (i32.const 0x220000) (i32.const {objects}) (i32.const 8) (i32.const 0x100000) (i32.const {BIG}))
    (call $fill (i32.const 512) (i32.const 1) (i32.const 0) (i32.const 320) (i32.const 3))
    (i32.store8 (i32.const 520) (i32.const 0))
    (call $fill (i32.const 524) (i32.const 1) (i32.const 0) (i32.const 0x220000) (i32.const {objects}))
    (call $fill (i32.const 536) (i32.const 1) (i32.const 0) (i32.const 0) (i32.const 0))
    (i32.store8 (i32.const 16) (i32.const 0))
    (call $fill (i32.const 20) (i32.const 1) (i32.const 0) (i32.const 512) (i32.const 1))
    (i32.const 16))

  (func (export "ksm:adapter/plugin@0.1.0#map-status")
    (param i32 i32 i32 i32 i32 i32 i32 i32 i32) (result i32)
    (i32.const 128)))"#
    )
}
