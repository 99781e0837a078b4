//! Kubernetes objects read from YAML/JSON files, for the offline commands. Every object keeps
//! where it came from, so errors name the file and the document.

use anyhow::{Context, bail};
use ksm_plugin_sdk::sources::{self, SourceRef};
use serde::Deserialize;
use serde_json::Value;
use std::path::{Path, PathBuf};

/// An object read from a file.
#[derive(Clone, Debug, PartialEq)]
pub struct Document {
    /// `<file>#<n>`: the file and the 1-based document number.
    pub origin: String,
    /// The object.
    pub object: Value,
}

impl Document {
    /// `apiVersion`.
    pub fn api_version(&self) -> &str {
        self.object["apiVersion"].as_str().unwrap_or_default()
    }
    /// `kind`.
    pub fn kind(&self) -> &str {
        self.object["kind"].as_str().unwrap_or_default()
    }
    /// `metadata.name`.
    pub fn name(&self) -> &str {
        self.object["metadata"]["name"].as_str().unwrap_or_default()
    }
    /// `metadata.namespace`.
    pub fn namespace(&self) -> &str {
        self.object["metadata"]["namespace"].as_str().unwrap_or_default()
    }
    /// `<namespace>/<name>` (or `<name>` for cluster-scoped objects).
    pub fn key(&self) -> String {
        match self.namespace() {
            "" => self.name().to_string(),
            ns => format!("{ns}/{}", self.name()),
        }
    }
}

/// All objects read from a set of files and directories.
#[derive(Clone, Debug, Default)]
pub struct Manifests {
    /// Every object, in reading order.
    pub documents: Vec<Document>,
}

impl Manifests {
    /// Reads every `.yaml`, `.yml` and `.json` file under `paths` (directories recursively, in
    /// name order). `kind: List` objects are expanded. Fails on the first file that does not
    /// parse or an object without `apiVersion`, `kind` or `metadata.name`.
    pub fn read(paths: &[PathBuf]) -> anyhow::Result<Self> {
        let mut files = Vec::new();
        for path in paths {
            collect_files(path, &mut files)?;
        }
        let mut documents = Vec::new();
        for file in files {
            let text = std::fs::read_to_string(&file).with_context(|| format!("reading {}", file.display()))?;
            for (i, doc) in serde_norway::Deserializer::from_str(&text).enumerate() {
                let origin = format!("{}#{}", file.display(), i + 1);
                let object = Value::deserialize(doc).with_context(|| format!("{origin}: not valid YAML"))?;
                push_object(object, origin, &mut documents)?;
            }
        }
        Ok(Self { documents })
    }

    /// Objects of `kind` in the k0rdent API group.
    pub fn k0rdent(&self, kind: &str) -> impl Iterator<Item = &Document> {
        self.documents
            .iter()
            .filter(move |d| d.kind() == kind && d.api_version() == ksm_plugin_sdk::k0rdent::API_VERSION)
    }

    /// The object with this apiVersion, kind, namespace and name, if any.
    pub fn find(&self, api_version: &str, kind: &str, namespace: &str, name: &str) -> Option<&Document> {
        self.documents.iter().find(|d| {
            d.api_version() == api_version && d.kind() == kind && d.namespace() == namespace && d.name() == name
        })
    }

    /// The Flux source `source`, if it is in the files (its status left out, as plugins get it).
    pub fn source(&self, source: &SourceRef) -> Option<Value> {
        sources::find(self.documents.iter().map(|d| &d.object), source)
    }

    /// The ServiceTemplate `name` in `namespace`, if any.
    pub fn template(&self, namespace: &str, name: &str) -> Option<&Document> {
        self.find(ksm_plugin_sdk::k0rdent::API_VERSION, "ServiceTemplate", namespace, name)
    }
}

fn collect_files(path: &Path, files: &mut Vec<PathBuf>) -> anyhow::Result<()> {
    let meta = std::fs::metadata(path).with_context(|| format!("reading {}", path.display()))?;
    if meta.is_file() {
        files.push(path.to_path_buf());
        return Ok(());
    }
    let mut entries: Vec<PathBuf> = std::fs::read_dir(path)
        .with_context(|| format!("reading directory {}", path.display()))?
        .map(|e| e.map(|e| e.path()))
        .collect::<Result<_, _>>()?;
    entries.sort();
    for entry in entries {
        let is_manifest = entry.extension().is_some_and(|e| e == "yaml" || e == "yml" || e == "json");
        if entry.is_dir() || is_manifest {
            collect_files(&entry, files)?;
        }
    }
    Ok(())
}

fn push_object(object: Value, origin: String, documents: &mut Vec<Document>) -> anyhow::Result<()> {
    if object.is_null() {
        return Ok(()); // an empty document, e.g. after a trailing `---`
    }
    if object["kind"] == "List" {
        for (i, item) in object["items"].as_array().into_iter().flatten().enumerate() {
            push_object(item.clone(), format!("{origin}.items[{i}]"), documents)?;
        }
        return Ok(());
    }
    for (field, value) in [
        ("apiVersion", &object["apiVersion"]),
        ("kind", &object["kind"]),
        ("metadata.name", &object["metadata"]["name"]),
    ] {
        if value.as_str().is_none_or(|s| s.is_empty()) {
            bail!("{origin}: object has no {field}");
        }
    }
    documents.push(Document { origin, object });
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_multi_document_files_lists_and_names_bad_documents() {
        let dir = std::env::temp_dir().join(format!("ksm-manifests-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(
            dir.join("a.yaml"),
            "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: one, namespace: x}\n---\n---\napiVersion: v1\nkind: List\nitems:\n- {apiVersion: v1, kind: Secret, metadata: {name: two}}\n",
        )
        .unwrap();
        std::fs::write(dir.join("notes.txt"), "ignored").unwrap();
        let m = Manifests::read(std::slice::from_ref(&dir)).unwrap();
        assert_eq!(m.documents.iter().map(Document::key).collect::<Vec<_>>(), ["x/one", "two"]);
        assert!(m.find("v1", "Secret", "", "two").is_some());

        std::fs::write(dir.join("b.yaml"), "kind: ConfigMap\nmetadata: {name: nameless}\n").unwrap();
        let err = Manifests::read(std::slice::from_ref(&dir)).unwrap_err().to_string();
        assert!(err.contains("b.yaml#1") && err.contains("apiVersion"), "{err}");
        std::fs::remove_dir_all(dir).unwrap();
    }
}
