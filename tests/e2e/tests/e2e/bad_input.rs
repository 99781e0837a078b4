//! Scenario 11: a ServiceSet the plugin rejects gets the plugin's reason in its status, and
//! does not hold up another ServiceSet of the namespace.

use ksm_e2e::expect::Expected;
use ksm_e2e::fixtures::two_services;
use ksm_e2e::status::{condition_is, condition_message};
use ksm_e2e::{Mode, Scenario};
use serde_json::json;

#[tokio::test(flavor = "multi_thread")]
async fn invalid_config_is_isolated() {
    let t = Scenario::start("bad-input", Mode::Observe).await;
    let mut bad = t.service_set_object("bad-config", two_services());
    bad["spec"]["provider"]["config"] = json!({"unknownField": 1});
    t.create(bad).await;
    t.create_service_set("good", two_services()).await;

    t.wait_converged("good").await;
    let bad = t
        .wait_service_set("bad-config", "ServicesTranslated False (InvalidConfig)", |ss| {
            condition_is(ss, "ServicesTranslated", "False", "InvalidConfig")
        })
        .await;
    let message = condition_message(&bad, "ServicesTranslated");
    assert!(message.contains("unknownField"), "the plugin's message names the field: {message:?}");
    assert!(t.children("bad-config").await.is_empty());

    let expected = Expected::translate(&t, "bad-config").await;
    assert_eq!(expected.error().map(|e| &e["kind"]), Some(&json!("InvalidConfig")), "{:#}", expected.translation);
}
