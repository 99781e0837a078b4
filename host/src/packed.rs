//! JSON texts of one kind kept zstd-compressed against a dictionary: the first text packed of
//! the same shape, with a status or without.
//!
//! The objects of one kind differ in little but names, generations and times, so a sibling's
//! text is the best dictionary there is: a HelmRelease with its own names and uid packs
//! smallest against one with a status like its own, less well against one without, and worst
//! without a dictionary (docs/performance.md). Objects come in two shapes, before their
//! controller's first status and after, and the first texts of a kind are mostly of the first
//! shape (the host's own applies, ServiceSets before the host writes their status) while the
//! kind lives in the second: so each shape gets its own dictionary, the first text of that
//! shape. A kind whose texts drift from the first packs less well, never wrongly: zstd finds
//! what matches and codes the rest.

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
    /// Whether the text has a status: which dictionary packed it.
    with_status: bool,
}

/// The compressor and decompressor of one dictionary.
struct Dictionary {
    compressor: Compressor<'static>,
    decompressor: Decompressor<'static>,
}

impl Dictionary {
    /// A dictionary of the start of `first`.
    fn new(first: &str) -> std::io::Result<Self> {
        let dictionary = &first.as_bytes()[..first.len().min(DICTIONARY_BYTES)];
        let mut compressor = Compressor::with_dictionary(LEVEL, dictionary)?;
        compressor.include_checksum(false)?;
        compressor.include_contentsize(false)?;
        compressor.include_dictid(false)?;
        Ok(Self { compressor, decompressor: Decompressor::with_dictionary(dictionary)? })
    }
}

/// Packs and unpacks the texts of one kind, each against the first text of its shape.
#[derive(Default)]
pub struct Packer {
    /// Without a status, with one; each made from the first text of its shape.
    dictionaries: [Option<Dictionary>; 2],
}

impl Packer {
    /// A packer that has seen no text yet.
    pub const fn new() -> Self {
        Self { dictionaries: [None, None] }
    }

    /// `text`, packed; `with_status` says whether the object it holds has a status.
    pub fn pack(&mut self, text: &str, with_status: bool) -> std::io::Result<Packed> {
        let len = u32::try_from(text.len()).map_err(std::io::Error::other)?;
        let dictionary = match &mut self.dictionaries[usize::from(with_status)] {
            Some(dictionary) => dictionary,
            empty => empty.insert(Dictionary::new(text)?),
        };
        let frame = dictionary.compressor.compress(text.as_bytes())?.into_boxed_slice();
        Ok(Packed { frame, len, with_status })
    }

    /// The text `packed` holds.
    pub fn unpack(&mut self, packed: &Packed) -> std::io::Result<Vec<u8>> {
        let Some(dictionary) = &mut self.dictionaries[usize::from(packed.with_status)] else {
            return Err(std::io::Error::other("packed by another packer"));
        };
        dictionary.decompressor.decompress(&packed.frame, packed.len as usize)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A HelmRelease as the cache holds one: the host's labels and owner, Flux's status.
    /// As the host applies one, before Flux's status: the text without its `status`.
    fn applied(service_set: &str, uid: &str) -> String {
        let text = release(service_set, uid, 1);
        format!("{}}}", &text[..text.find(r#","status""#).unwrap()])
    }

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
        let mut packer = Packer::new();
        packer.pack(&release("cluster-00001", "0b8e1d2c-5a7f-4e2b-9d3c-8f1e2a3b4c5d", 1), true).unwrap();
        let text = release("cluster-04711", "7f3a9c01-2d4e-4b8f-a6c5-1e0d9b8a7c6f", 3);
        let packed = packer.pack(&text, true).unwrap();
        assert!(packed.frame.len() * 8 < text.len(), "{} bytes of {}", packed.frame.len(), text.len());
        assert_eq!(packer.unpack(&packed).unwrap(), text.as_bytes());
    }

    /// A kind's first texts are the host's applies, without a status; the kind then lives with
    /// one. Packed against the first text, a released HelmRelease took many more bytes.
    #[test]
    fn texts_with_a_status_pack_against_the_first_with_one_though_the_first_had_none() {
        let mut packer = Packer::new();
        let first = applied("cluster-00001", "0b8e1d2c-5a7f-4e2b-9d3c-8f1e2a3b4c5d");
        assert!(serde_json::from_str::<serde_json::Value>(&first).unwrap().get("status").is_none());
        packer.pack(&first, false).unwrap();
        packer.pack(&release("cluster-00002", "5d1c8e2f-3b4a-4c6d-8e9f-0a1b2c3d4e5f", 1), true).unwrap();
        let text = release("cluster-04711", "7f3a9c01-2d4e-4b8f-a6c5-1e0d9b8a7c6f", 3);
        let packed = packer.pack(&text, true).unwrap();
        assert!(packed.frame.len() * 8 < text.len(), "{} bytes of {}", packed.frame.len(), text.len());
        let applied = applied("cluster-04711", "7f3a9c01-2d4e-4b8f-a6c5-1e0d9b8a7c6f");
        let packed_applied = packer.pack(&applied, false).unwrap();
        assert!(
            packed_applied.frame.len() * 8 < applied.len(),
            "{} bytes of {}",
            packed_applied.frame.len(),
            applied.len()
        );
        assert_eq!(packer.unpack(&packed).unwrap(), text.as_bytes());
        assert_eq!(packer.unpack(&packed_applied).unwrap(), applied.as_bytes());
    }

    #[test]
    fn a_text_unlike_the_first_and_one_longer_than_the_dictionary_still_round_trip() {
        let mut packer = Packer::new();
        packer.pack(&"x".repeat(3 * DICTIONARY_BYTES), false).unwrap();
        let unlike = r#"{"kind":"Application","spec":{"destination":{"server":"https://eu"}}}"#;
        let long = release(&"n".repeat(100_000), "u", 1);
        for text in [unlike, long.as_str(), ""] {
            let packed = packer.pack(text, false).unwrap();
            assert_eq!(packer.unpack(&packed).unwrap(), text.as_bytes());
        }
    }
}
