//! What redlock generates from its grammar for shells and `man`: the completion scripts load in
//! their shell and complete what the grammar holds, and the man pages render.

use std::path::PathBuf;
use std::process::{Command, Output, Stdio};

const BIN: &str = env!("CARGO_BIN_EXE_redlock");

/// The commands `redlock --help` lists.
const COMMANDS: [&str; 9] = [
    "run",
    "status",
    "release",
    "nodes",
    "elect",
    "leader",
    "stats",
    "completions",
    "man",
];

fn redlock(args: &[&str]) -> Output {
    let o = Command::new(BIN)
        .args(args)
        .stdin(Stdio::null())
        .output()
        .expect("run redlock");
    assert_eq!(
        o.status.code(),
        Some(0),
        "redlock {args:?}: {}",
        String::from_utf8_lossy(&o.stderr)
    );
    o
}

fn text(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

/// Runs `program args...` if the program is installed; `None` otherwise.
fn shell(program: &str, args: &[&str]) -> Option<Output> {
    match Command::new(program).args(args).output() {
        Ok(o) => Some(o),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            eprintln!("SKIPPED: {program} is not installed");
            None
        }
        Err(e) => panic!("{program}: {e}"),
    }
}

fn tmp(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!(
        "redquorum-cli-generated-{}-{name}",
        std::process::id()
    ));
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

#[test]
fn every_command_has_its_help_and_the_top_level_help_lists_them_all() {
    let top = text(&redlock(&["--help"]));
    for command in COMMANDS {
        assert!(top.contains(&format!("\n  {command} ")), "{command}: {top}");
        for help in [
            &[command, "--help"][..],
            &[command, "-h"],
            &["help", command],
        ] {
            let out = text(&redlock(help));
            assert!(
                out.contains(&format!("Usage: redlock {command}")),
                "{help:?}: {out}"
            );
        }
    }
    // The one table of exit codes.
    for code in ["0", "3", "64", "69", "70", "75", "141"] {
        assert!(top.contains(&format!("\n  {code} ")), "{code}: {top}");
    }
}

#[test]
fn the_bash_completion_loads_and_completes_commands_and_options() {
    let script = format!(
        "source <({BIN} completions bash) || exit 1
         complete -p redlock || exit 1
         COMP_WORDS=(redlock st); COMP_CWORD=1; _redlock redlock st redlock
         echo \"commands: ${{COMPREPLY[*]}}\"
         COMP_WORDS=(redlock run --kill-); COMP_CWORD=2; _redlock redlock --kill- run
         echo \"options: ${{COMPREPLY[*]}}\""
    );
    let o = shell("bash", &["-c", &script]).expect("bash is installed");
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(
        o.status.success(),
        "{out}{}",
        String::from_utf8_lossy(&o.stderr)
    );
    assert!(out.contains("-F _redlock redlock"), "{out}");
    assert!(out.contains("commands: status stats"), "{out}");
    assert!(out.contains("options: --kill-signal --kill-grace"), "{out}");
}

#[test]
fn the_zsh_and_fish_completions_are_valid_scripts() {
    let dir = tmp("completions");
    let zsh = text(&redlock(&["completions", "zsh"]));
    assert!(zsh.starts_with("#compdef redlock\n"), "{zsh}");
    let fish = text(&redlock(&["completions", "fish"]));
    assert!(fish.contains("complete -c redlock"), "{fish}");
    std::fs::write(dir.join("_redlock"), &zsh).unwrap();
    std::fs::write(dir.join("redlock.fish"), &fish).unwrap();
    let zsh_file = dir.join("_redlock").display().to_string();
    if let Some(o) = shell("zsh", &["-n", &zsh_file]) {
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    }
    let fish_file = dir.join("redlock.fish").display().to_string();
    let complete = format!("source {fish_file}; complete -C 'redlock run --kill-'");
    if let Some(o) = shell("fish", &["-c", &complete]) {
        let out = String::from_utf8_lossy(&o.stdout);
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
        assert!(
            out.contains("--kill-signal") && out.contains("--kill-grace"),
            "{out}"
        );
    }
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn the_man_pages_render_one_per_command() {
    // A roff page: its title (after the string definitions of its preamble), then sections.
    let page = text(&redlock(&["man"]));
    assert!(
        page.lines().any(|l| l.starts_with(".TH redlock 1 ")),
        "{page}"
    );
    assert!(page.contains(".SH NAME\nredlock \\- The Redlock"), "{page}");
    let run = text(&redlock(&["man", "run"]));
    assert!(
        run.lines().any(|l| l.starts_with(".TH redlock-run 1 ")),
        "{run}"
    );
    for section in [
        "SYNOPSIS",
        "DESCRIPTION",
        "OPTIONS",
        "NODES",
        "\"EXIT STATUS\"",
    ] {
        assert!(
            run.contains(&format!(".SH {section}\n")),
            "{section}: {run}"
        );
    }
    // Every option of the help is on the page.
    let help = text(&redlock(&["run", "--help"]));
    let options: Vec<&str> = help
        .lines()
        .map(|l| l.trim_start().trim_start_matches("-h, "))
        .filter(|l| l.starts_with("--"))
        .filter_map(|l| l.split_whitespace().next())
        .collect();
    assert!(options.len() > 10, "{help}");
    for option in options {
        let escaped = option.replace('-', "\\-");
        assert!(run.contains(&escaped), "{option} is not on the page");
    }

    let dir = tmp("man");
    redlock(&["man", "--out-dir", dir.to_str().unwrap()]);
    let mut written: Vec<String> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    written.sort();
    let mut expected: Vec<String> = COMMANDS
        .iter()
        .map(|c| format!("redlock-{c}.1"))
        .chain(["redlock.1".to_owned()])
        .collect();
    expected.sort();
    assert_eq!(written, expected);
    let run_file = dir.join("redlock-run.1").display().to_string();
    if let Some(o) = shell("man", &["-l", &run_file]) {
        let out = String::from_utf8_lossy(&o.stdout);
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
        assert!(
            out.contains("SYNOPSIS")
                && out.contains("--kill-signal")
                && out.contains("EXIT STATUS"),
            "{out}"
        );
    }
    std::fs::remove_dir_all(&dir).unwrap();
}
