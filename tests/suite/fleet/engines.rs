//! The engines that run fleets: the Kubernetes manifests in `deploy/kubernetes/`, validated
//! against a pinned copy of the Kubernetes 1.37 JSON schema (strict: unknown fields are
//! errors), and the GitHub Actions matrix workflow `upkeep init --fleet` writes. (The workflow
//! also goes through the checks of every shipped workflow in `actions/workflows.rs`, actionlint
//! and zizmor in CI.)

use std::path::{Path, PathBuf};

use serde_json::{Map, Value};
use sha2::{Digest, Sha256};
use yaml_rust2::{Yaml, YamlLoader};

fn project(path: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join(path)
}

const SCHEMA_DIR: &str = "tests/fixtures/kubernetes-schema/v1.37.0-local-strict";
const DEFINITIONS_ID: &str = "https://kubernetes.io/api/_definitions.json";

fn yaml_to_json(yaml: &Yaml) -> Value {
    match yaml {
        Yaml::Real(text) => text
            .parse::<f64>()
            .map(Value::from)
            .unwrap_or_else(|_| Value::String(text.clone())),
        Yaml::Integer(number) => Value::from(*number),
        Yaml::String(text) => Value::String(text.clone()),
        Yaml::Boolean(flag) => Value::Bool(*flag),
        Yaml::Array(items) => Value::Array(items.iter().map(yaml_to_json).collect()),
        Yaml::Hash(hash) => Value::Object(
            hash.iter()
                .map(|(key, value)| {
                    let key = match key {
                        Yaml::String(text) => text.clone(),
                        Yaml::Integer(number) => number.to_string(),
                        other => panic!("unexpected key {other:?}"),
                    };
                    (key, yaml_to_json(value))
                })
                .collect::<Map<_, _>>(),
        ),
        Yaml::Null => Value::Null,
        other => panic!("unexpected YAML {other:?}"),
    }
}

/// Every document of every manifest: (file, document).
fn manifests() -> Vec<(String, Value)> {
    let mut paths: Vec<PathBuf> = std::fs::read_dir(project("deploy/kubernetes"))
        .expect("deploy/kubernetes")
        .map(|entry| entry.expect("entry").path())
        .filter(|path| path.extension().is_some_and(|e| e == "yaml"))
        .collect();
    paths.sort();
    let mut documents = Vec::new();
    for path in paths {
        let text = std::fs::read_to_string(&path).expect("read");
        let name = path.file_name().expect("name").to_string_lossy().into_owned();
        for doc in YamlLoader::load_from_str(&text).unwrap_or_else(|e| panic!("{name}: {e}")) {
            documents.push((name.clone(), yaml_to_json(&doc)));
        }
    }
    assert_eq!(documents.len(), 3, "the CronJob, the ConfigMap and the Secret");
    documents
}

/// The pinned schema files, checked against their recorded SHA-256 sums.
fn schema_file(name: &str) -> Value {
    let dir = project(SCHEMA_DIR);
    let sums = std::fs::read_to_string(dir.join("SHA256SUMS")).expect("SHA256SUMS");
    let expected = sums
        .lines()
        .find_map(|line| {
            line.split_once("  ")
                .filter(|(_, file)| *file == name)
                .map(|(sum, _)| sum.to_owned())
        })
        .unwrap_or_else(|| panic!("{name} is not pinned in SHA256SUMS"));
    let bytes = std::fs::read(dir.join(name)).expect("schema file");
    let actual: String = Sha256::digest(&bytes).iter().map(|b| format!("{b:02x}")).collect();
    assert_eq!(actual, expected, "{name} differs from the pinned copy");
    serde_json::from_slice(&bytes).expect("schema is JSON")
}

fn schema_for(document: &Value) -> &'static str {
    match (document["apiVersion"].as_str(), document["kind"].as_str()) {
        (Some("batch/v1"), Some("CronJob")) => "cronjob-batch-v1.json",
        (Some("v1"), Some("ConfigMap")) => "configmap-v1.json",
        (Some("v1"), Some("Secret")) => "secret-v1.json",
        other => panic!("no pinned schema for {other:?}"),
    }
}

/// Validation errors of `document` against its kind's schema (offline: every `$ref` resolves
/// into the pinned `_definitions.json`).
fn validation_errors(document: &Value) -> Vec<String> {
    let registry = jsonschema::Registry::new()
        .add(DEFINITIONS_ID, schema_file("_definitions.json"))
        .expect("definitions")
        .prepare()
        .expect("registry");
    let validator = jsonschema::options()
        .offline()
        .with_registry(&registry)
        .build(&schema_file(schema_for(document)))
        .expect("schema builds");
    validator
        .iter_errors(document)
        .map(|error| format!("{} at {}", error, error.instance_path()))
        .collect()
}

#[test]
fn the_kubernetes_manifests_validate_against_the_pinned_schema() {
    for (name, document) in manifests() {
        let errors = validation_errors(&document);
        assert!(errors.is_empty(), "{name}: {errors:#?}");
    }
}

fn job(doc: &mut Value) -> &mut Value {
    &mut doc["spec"]["jobTemplate"]["spec"]
}

/// The check can fail: a misspelt field, a wrong type and a field in the wrong place are each
/// reported.
#[test]
fn a_broken_manifest_fails_validation() {
    let (_, cronjob) = manifests()
        .into_iter()
        .find(|(_, doc)| doc["kind"] == "CronJob")
        .expect("the CronJob");
    let mut misspelt = cronjob.clone();
    let mode = job(&mut misspelt)
        .as_object_mut()
        .expect("job spec")
        .remove("completionMode")
        .expect("set");
    job(&mut misspelt)["completionMod"] = mode;
    let mut wrong_type = cronjob.clone();
    job(&mut wrong_type)["completions"] = Value::from("four");
    let mut misplaced = cronjob.clone();
    misplaced["spec"]["completionMode"] = Value::from("Indexed");
    for (what, broken, field) in [
        ("misspelt", misspelt, "completionMod"),
        ("wrong type", wrong_type, "completions"),
        ("misplaced", misplaced, "completionMode"),
    ] {
        let errors = validation_errors(&broken);
        assert!(
            errors.iter().any(|error| error.contains(field)),
            "{what}: no error names {field}: {errors:#?}"
        );
    }
}

/// What the issue asks of the Kubernetes engine beyond the schema: an Indexed Job whose pods
/// run `upkeep fleet --shard $JOB_COMPLETION_INDEX/N` with N the number of completions,
/// credentials from a Secret, resources set.
#[test]
fn the_cronjob_runs_one_shard_per_index_with_secrets_and_resources() {
    let documents = manifests();
    let cronjob = &documents
        .iter()
        .find(|(_, doc)| doc["kind"] == "CronJob")
        .expect("CronJob")
        .1;
    let job = &cronjob["spec"]["jobTemplate"]["spec"];
    assert_eq!(job["completionMode"], "Indexed");
    let completions = job["completions"].as_i64().expect("completions");
    assert!(job["parallelism"].as_i64().expect("parallelism") <= completions);
    let pod = &job["template"]["spec"];
    assert_eq!(pod["restartPolicy"], "Never", "podFailurePolicy needs it");
    assert_eq!(pod["automountServiceAccountToken"], false);
    let container = &pod["containers"][0];
    let args: Vec<&str> = container["args"]
        .as_array()
        .expect("args")
        .iter()
        .filter_map(Value::as_str)
        .collect();
    assert_eq!(
        args[..3],
        ["fleet", "--shard", &format!("$(JOB_COMPLETION_INDEX)/{completions}")]
    );
    let env = container["env"].as_array().expect("env");
    let index = env
        .iter()
        .find(|e| e["name"] == "JOB_COMPLETION_INDEX")
        .expect("the index variable");
    assert_eq!(
        index["valueFrom"]["fieldRef"]["fieldPath"],
        "metadata.annotations['batch.kubernetes.io/job-completion-index']"
    );
    let secret_name = container["envFrom"]
        .as_array()
        .expect("envFrom")
        .iter()
        .find_map(|source| source["secretRef"]["name"].as_str())
        .expect("credentials from a Secret");
    let secret = &documents
        .iter()
        .find(|(_, doc)| doc["kind"] == "Secret")
        .expect("Secret")
        .1;
    assert_eq!(secret["metadata"]["name"], secret_name);
    assert!(secret["stringData"]["GITHUB_TOKEN"].is_string());
    for kind in ["requests", "limits"] {
        for resource in ["cpu", "memory"] {
            assert!(container["resources"][kind][resource].is_string(), "{kind}.{resource}");
        }
    }
    assert_eq!(container["securityContext"]["readOnlyRootFilesystem"], true);
    // Nothing secret in the CronJob or the ConfigMap.
    let text = std::fs::read_to_string(project("deploy/kubernetes/cronjob.yaml")).expect("read");
    assert!(!text.contains("GITHUB_TOKEN:") && !text.contains("API_KEY:"));
    // The ConfigMap's operator config is a valid operator config.
    let configmap = &documents
        .iter()
        .find(|(_, doc)| doc["kind"] == "ConfigMap")
        .expect("ConfigMap")
        .1;
    let operator = configmap["data"]["operator.toml"].as_str().expect("operator.toml");
    upkeep::config::FileConfig::parse(operator, "operator.toml").expect("a valid operator config");
}

fn parse_workflow(text: &str) -> Yaml {
    YamlLoader::load_from_str(text).expect("YAML").remove(0)
}

/// `upkeep init --fleet`'s workflow: a scheduled matrix of shards, each job taking its shard
/// from the matrix's index and total, least privilege, the fleet token from a secret.
#[test]
fn the_fleet_workflow_is_a_scheduled_matrix_of_shards() {
    let doc = parse_workflow(&upkeep::init::fleet_workflow().expect("pinned"));
    assert!(doc["on"]["schedule"][0]["cron"].as_str().is_some(), "scheduled");
    assert!(!doc["on"]["workflow_dispatch"].is_badvalue(), "and by hand");
    assert_eq!(doc["permissions"], Yaml::Hash(Default::default()));
    let job = &doc["jobs"]["shard"];
    assert_eq!(job["strategy"]["fail-fast"], Yaml::Boolean(false));
    let shards = job["strategy"]["matrix"]["shard"].as_vec().expect("matrix.shard");
    assert!(shards.len() >= 2);
    for (index, shard) in shards.iter().enumerate() {
        assert_eq!(shard.as_i64(), Some(index as i64), "shards are 0..N");
    }
    let parallel = job["strategy"]["max-parallel"].as_i64().expect("max-parallel");
    assert!(parallel >= 1 && parallel as usize <= shards.len());
    assert_eq!(job["permissions"]["contents"].as_str(), Some("read"));
    assert_eq!(job["environment"].as_str(), Some("upkeep"));
    let step = &job["steps"][0];
    assert_eq!(
        step["uses"].as_str(),
        Some(format!("upkeep-bot/upkeep@{}", upkeep::init::ACTION_COMMIT).as_str())
    );
    let with = &step["with"];
    assert_eq!(with["command"].as_str(), Some("fleet"));
    assert_eq!(
        with["shard"].as_str(),
        Some("${{ strategy.job-index }}/${{ strategy.job-total }}")
    );
    for secret in ["api-key", "github-token"] {
        assert!(
            with[secret].as_str().is_some_and(|v| v.starts_with("${{ secrets.")),
            "{secret}"
        );
    }
    // Every input it gives, action.yml declares and hands to upkeep through env.
    let action = parse_workflow(&std::fs::read_to_string(project("action.yml")).expect("action.yml"));
    let run = action["runs"]["steps"]
        .as_vec()
        .expect("steps")
        .iter()
        .find(|s| s["id"].as_str() == Some("run"))
        .expect("the run step");
    for (input, variable) in [
        ("command", "UPKEEP_ACTION_COMMAND"),
        ("repos", "UPKEEP_REPOS"),
        ("org", "UPKEEP_ORG"),
        ("topic", "UPKEEP_TOPIC"),
        ("shard", "UPKEEP_SHARD"),
        ("jobs", "UPKEEP_JOBS"),
        ("fleet-max-cost", "UPKEEP_FLEET_MAX_COST"),
    ] {
        assert!(
            action["inputs"][input]["description"].as_str().is_some(),
            "{input} declared"
        );
        assert_eq!(
            run["env"][variable].as_str(),
            Some(format!("${{{{ inputs.{input} }}}}").as_str()),
            "{input} -> {variable}"
        );
    }
    for (input, _) in with
        .as_hash()
        .expect("with")
        .iter()
        .map(|(k, v)| (k.as_str().expect("key"), v))
    {
        assert!(
            !action["inputs"][input].is_badvalue(),
            "action.yml has no input {input}"
        );
    }
}

/// `upkeep init --fleet` writes exactly that workflow (and nothing else).
#[test]
fn init_fleet_writes_the_workflow() {
    let dir = tempfile::tempdir().expect("tempdir");
    super::super::support::git(dir.path(), &["init", "-q"]);
    let out = super::super::support::Upkeep::new()
        .args(["init", "--fleet", "--repo-dir"])
        .args([dir.path()])
        .run();
    out.assert_code(0);
    let written = std::fs::read_to_string(dir.path().join(".github/workflows/upkeep-fleet.yml")).expect("written");
    assert_eq!(written, upkeep::init::fleet_workflow().expect("pinned"));
    assert!(!dir.path().join(".upkeep.toml").exists());
    assert!(out.stdout.contains("UPKEEP_FLEET_TOKEN"), "{}", out.stdout);
}
