//! Data affinity as a user sees it: `weir example affinity` and the example program.

use std::process::Command;

#[test]
fn weir_example_affinity_prints_owners_and_the_seed_sums() {
    let out = Command::new(env!("CARGO_BIN_EXE_weir"))
        .args(["example", "affinity", "--owners", "4"])
        .output()
        .expect("weir runs");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = String::from_utf8(out.stdout).unwrap();
    for (i, sum) in [15, 30, 45, 60, 75].iter().enumerate() {
        assert!(
            text.lines().any(
                |l| l.starts_with(&format!("sum of key{}-* at owner", i + 1))
                    && l.ends_with(&format!("= {sum}"))
            ),
            "{text}"
        );
    }
    // Every affinity group on one owner, printed per key.
    for i in 1..=5 {
        let owners: std::collections::BTreeSet<&str> = text
            .lines()
            .filter(|l| l.starts_with(&format!("[Affinity Key] key = key{i}-")))
            .map(|l| l.rsplit("owner = ").next().unwrap())
            .collect();
        assert_eq!(owners.len(), 1, "key{i}-* spread: {owners:?}");
    }
    assert_eq!(text.matches("[No Affinity Key]").count(), 25);
    assert!(text.contains("every group is on one owner: true"), "{text}");
}

#[test]
fn weir_example_affinity_refuses_zero_owners_naming_the_flag() {
    let out = Command::new(env!("CARGO_BIN_EXE_weir"))
        .args(["example", "affinity", "--owners", "0"])
        .output()
        .expect("weir runs");
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("--owners"));
}
