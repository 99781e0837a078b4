//! JSON texts of one kind kept zstd-compressed against a dictionary: the first text packed.
//!
//! The children of one kind differ in little but names, generations and times, so a sibling's
//! text is the best dictionary there is: a 1.2 KB HelmRelease with its own names and uid packs
//! to ~100 bytes against it, ~550 without one (docs/performance.md). A kind whose texts drift
//! from the first packs less well, never wrongly: zstd finds what matches and codes the rest.

use zstd::bulk::{Compressor, Decompressor};

/// How much of the first text becomes the dictionary: a bound on what a kind keeps for good.
const DICTIONARY_BYTES: usize = 16 * 1024;

/// zstd's fastest level: the texts are small and the dictionary does the work.
const LEVEL: i32 = 1;

/// One packed text.
#[derive(Clone)]
pub struct Packed {
    /// The zstd frame, without checksum, size and dictionary id (the packer knows them): a few
    /// bytes each, on tens of thousands of entries.
    frame: Box<[u8]>,
    /// The text's length, to unpack into an exact buffer.
    len: u32,
}

/// Packs and unpacks the texts of one kind.
pub struct Packer {
    compressor: Compressor<'static>,
    decompressor: Decompressor<'static>,
}

impl Packer {
    /// A packer whose dictionary is the start of `first`, the first text of its kind.
    pub fn new(first: &str) -> std::io::Result<Packer> {
        let dictionary = &first.as_bytes()[..first.len().min(DICTIONARY_BYTES)];
        let mut compressor = Compressor::with_dictionary(LEVEL, dictionary)?;
        compressor.include_checksum(false)?;
        compressor.include_contentsize(false)?;
        compressor.include_dictid(false)?;
        Ok(Packer { compressor, decompressor: Decompressor::with_dictionary(dictionary)? })
    }

    /// `text`, packed.
    pub fn pack(&mut self, text: &str) -> std::io::Result<Packed> {
        let len = u32::try_from(text.len()).map_err(std::io::Error::other)?;
        Ok(Packed { frame: self.compressor.compress(text.as_bytes())?.into_boxed_slice(), len })
    }

    /// The text `packed` holds.
    pub fn unpack(&mut self, packed: &Packed) -> std::io::Result<Vec<u8>> {
        self.decompressor.decompress(&packed.frame, packed.len as usize)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A HelmRelease as the cache holds one: the host's labels and owner, Flux's status.
    fn release(service_set: &str, uid: &str, generation: u32) -> String {
        let meta = format!(
            r#""metadata":{{"name":"{service_set}.svc-1","namespace":"bench","uid":"{uid}","resourceVersion":"{generation}4711","generation":{generation},"creationTimestamp":"2026-11-26T10:00:00Z","labels":{{"ksm.k0rdent.mirantis.com/service-set":"{service_set}","ksm.k0rdent.mirantis.com/service-set-namespace":"bench","ksm.k0rdent.mirantis.com/service":"svc-1"}},"ownerReferences":[{{"apiVersion":"k0rdent.mirantis.com/v1beta1","kind":"ServiceSet","name":"{service_set}","uid":"{uid}","controller":true,"blockOwnerDeletion":true}}]}}"#
        );
        let spec = r#""spec":{"chartRef":{"kind":"HelmChart","name":"podinfo-6-7-1","namespace":"bench"},"install":{"createNamespace":true},"interval":"10m","releaseName":"svc-1","storageNamespace":"svc-1","targetNamespace":"svc-1","values":{"replicaCount":2}}"#;
        let condition = |type_: &str| {
            format!(
                r#"{{"type":"{type_}","status":"True","reason":"InstallSucceeded","message":"Helm install succeeded","observedGeneration":{generation},"lastTransitionTime":"2026-11-26T10:0{generation}:01Z"}}"#
            )
        };
        let status = format!(
            r#""status":{{"observedGeneration":{generation},"conditions":[{},{}]}}"#,
            condition("Ready"),
            condition("Released")
        );
        format!(r#"{{"apiVersion":"helm.toolkit.fluxcd.io/v2","kind":"HelmRelease",{meta},{spec},{status}}}"#)
    }

    #[test]
    fn a_sibling_packs_to_a_fraction_of_its_text_and_unpacks_whole() {
        let mut packer = Packer::new(&release("cluster-00001", "0b8e1d2c-5a7f-4e2b-9d3c-8f1e2a3b4c5d", 1)).unwrap();
        let text = release("cluster-04711", "7f3a9c01-2d4e-4b8f-a6c5-1e0d9b8a7c6f", 3);
        let packed = packer.pack(&text).unwrap();
        assert!(packed.frame.len() * 8 < text.len(), "{} bytes of {}", packed.frame.len(), text.len());
        assert_eq!(packer.unpack(&packed).unwrap(), text.as_bytes());
    }

    #[test]
    fn a_text_unlike_the_first_and_one_longer_than_the_dictionary_still_round_trip() {
        let mut packer = Packer::new(&"x".repeat(3 * DICTIONARY_BYTES)).unwrap();
        let unlike = r#"{"kind":"Application","spec":{"destination":{"server":"https://eu"}}}"#;
        let long = release(&"n".repeat(100_000), "u", 1);
        for text in [unlike, long.as_str(), ""] {
            let packed = packer.pack(text).unwrap();
            assert_eq!(packer.unpack(&packed).unwrap(), text.as_bytes());
        }
    }
}
