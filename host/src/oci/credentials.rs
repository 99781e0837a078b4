//! Registry credentials: anonymous or HTTP basic auth, read from a `.dockerconfigjson`.

use super::client::OciError;
use base64::Engine as _;
use oci_client::secrets::RegistryAuth;
use serde::Deserialize;

/// Registry credentials: anonymous or HTTP basic auth. `Debug` does not show the password.
#[derive(Clone, Default, PartialEq, Eq)]
pub struct Credentials {
    basic: Option<(String, String)>,
}

impl std::fmt::Debug for Credentials {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match &self.basic {
            Some((username, _)) => write!(f, "Credentials::Basic({username:?}, <redacted>)"),
            None => f.write_str("Credentials::Anonymous"),
        }
    }
}

impl Credentials {
    /// No credentials.
    pub fn anonymous() -> Self {
        Self::default()
    }

    /// HTTP basic auth.
    pub fn basic(username: impl Into<String>, password: impl Into<String>) -> Self {
        Self { basic: Some((username.into(), password.into())) }
    }

    /// The credentials for `registry` (e.g. `ghcr.io`, `127.0.0.1:5000`) in the `.dockerconfigjson`
    /// of a `kubernetes.io/dockerconfigjson` Secret: `auths.<registry>.auth` (base64
    /// `user:pass`) or `username`/`password`. A registry not in the file is anonymous.
    pub fn from_dockerconfigjson(bytes: &[u8], registry: &str) -> Result<Self, OciError> {
        #[derive(Deserialize)]
        struct DockerConfig {
            #[serde(default)]
            auths: std::collections::BTreeMap<String, Entry>,
        }
        #[derive(Deserialize)]
        struct Entry {
            auth: Option<String>,
            username: Option<String>,
            password: Option<String>,
        }
        let invalid = |reason: String| OciError::DockerConfig { registry: registry.to_string(), reason };
        // serde's messages quote the values they met ("invalid type: string \"hunter2\""):
        // only the kind of error and where it is may reach a status or a log.
        let config: DockerConfig = serde_json::from_slice(bytes).map_err(|e| {
            invalid(format!(
                "not a Docker config ({:?} error at line {}, column {})",
                e.classify(),
                e.line(),
                e.column()
            ))
        })?;
        let wanted = normalize_registry(registry);
        let Some(entry) = config.auths.into_iter().find_map(|(k, v)| (normalize_registry(&k) == wanted).then_some(v))
        else {
            return Ok(Self::anonymous());
        };
        if let (Some(username), Some(password)) = (entry.username, entry.password) {
            return Ok(Self::basic(username, password));
        }
        let Some(auth) = entry.auth else {
            return Err(invalid("the entry has neither `auth` nor `username` and `password`".into()));
        };
        let decoded = base64::engine::general_purpose::STANDARD
            .decode(auth.trim())
            .map_err(|_| invalid("`auth` is not base64".into()))?;
        let decoded = String::from_utf8(decoded).map_err(|_| invalid("`auth` is not UTF-8".into()))?;
        let (username, password) =
            decoded.split_once(':').ok_or_else(|| invalid("`auth` is not base64 of `user:password`".into()))?;
        Ok(Self::basic(username, password))
    }

    pub(super) fn auth(&self) -> RegistryAuth {
        match &self.basic {
            Some((username, password)) => RegistryAuth::Basic(username.clone(), password.clone()),
            None => RegistryAuth::Anonymous,
        }
    }
}

/// `auths` keys may be URLs (`https://index.docker.io/v1/`); Docker Hub has several names.
fn normalize_registry(key: &str) -> &str {
    let key = key.strip_prefix("https://").or_else(|| key.strip_prefix("http://")).unwrap_or(key);
    match key.split('/').next().unwrap_or(key) {
        "index.docker.io" | "registry-1.docker.io" => "docker.io",
        host => host,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dockerconfigjson_auth_and_username_password() {
        let auth = base64::engine::general_purpose::STANDARD.encode("bot:s3cr:et");
        let json = format!(
            r#"{{"auths": {{"https://ghcr.io/v1/": {{"auth": "{auth}"}},
                "127.0.0.1:5000": {{"username": "u", "password": "p"}},
                "https://index.docker.io/v1/": {{"auth": "{auth}"}}}}}}"#
        );
        let creds = |registry| Credentials::from_dockerconfigjson(json.as_bytes(), registry).unwrap();
        assert_eq!(creds("ghcr.io"), Credentials::basic("bot", "s3cr:et"));
        assert_eq!(creds("127.0.0.1:5000"), Credentials::basic("u", "p"));
        assert_eq!(creds("docker.io"), Credentials::basic("bot", "s3cr:et"));
        assert_eq!(creds("quay.io"), Credentials::anonymous());
        assert!(!format!("{:?}", creds("ghcr.io")).contains("s3cr"), "Debug hides the password");
    }

    #[test]
    fn dockerconfigjson_errors_name_the_registry() {
        let bad = [r#"{"auths": {"r.io": {"auth": "%%%"}}}"#, r#"{"auths": {"r.io": {}}}"#, "not json"];
        for json in bad {
            let error = Credentials::from_dockerconfigjson(json.as_bytes(), "r.io").unwrap_err();
            assert!(matches!(error, OciError::DockerConfig { .. }), "{json}: {error}");
            assert!(error.to_string().contains("r.io"), "{error}");
        }
    }

    #[test]
    fn a_malformed_dockerconfigjson_never_echoes_its_secrets() {
        let bad = [
            r#"{"auths": {"r.io": "hunter2-token"}}"#,
            r#"{"auths": {"r.io": {"auth": "hunter2-token!"}}}"#,
            r#"{"auths": {"r.io": {"auth": ["hunter2-token"]}}}"#,
            r#"{"auths": {"r.io": {"password": 7, "username": "hunter2-token"}}}"#,
            r#"{"auths": "hunter2-token"}"#,
        ];
        for json in bad {
            let error = Credentials::from_dockerconfigjson(json.as_bytes(), "r.io").unwrap_err().to_string();
            assert!(!error.contains("hunter2"), "{json}: {error}");
            assert!(error.contains("r.io"), "{error}");
        }
    }
}
