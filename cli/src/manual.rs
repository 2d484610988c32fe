//! The shell completions and the man pages, generated from the grammar that parses the
//! arguments (`redlock completions SHELL`, `redlock man`), so that neither can drift from it.

use std::path::Path;

/// The completion script of `shell` for the command line `cmd`.
pub fn completions(mut cmd: clap::Command, shell: clap_complete::Shell) -> String {
    let mut script = Vec::new();
    clap_complete::generate(shell, &mut cmd, "redlock", &mut script);
    String::from_utf8_lossy(&script).into_owned()
}

/// The man page of `redlock` itself (`command` `None`) or of one of its commands, in roff;
/// `None` when there is no such command.
pub fn page(mut cmd: clap::Command, command: Option<&str>) -> Option<String> {
    cmd = cmd.disable_help_subcommand(true);
    cmd.build();
    let cmd = match command {
        None => cmd,
        Some(name) => cmd
            .get_subcommands()
            .find(|s| s.get_name() == name && !s.is_hide_set())?
            .clone(),
    };
    let mut roff = Vec::new();
    man(cmd).render(&mut roff).ok()?;
    Some(titled(&String::from_utf8_lossy(&roff)))
}

/// Writes the man page of `redlock` and of each of its commands into `dir`: `redlock.1`,
/// `redlock-run.1`, ...
pub fn write_pages(mut cmd: clap::Command, dir: &Path) -> std::io::Result<()> {
    cmd = cmd.disable_help_subcommand(true);
    cmd.build();
    let mut pages = vec![cmd.clone()];
    pages.extend(cmd.get_subcommands().filter(|s| !s.is_hide_set()).cloned());
    for page in pages {
        let man = man(page);
        let mut roff = Vec::new();
        man.render(&mut roff)?;
        std::fs::write(
            dir.join(man.get_filename()),
            titled(&String::from_utf8_lossy(&roff)),
        )?;
    }
    Ok(())
}

fn man(cmd: clap::Command) -> clap_mangen::Man {
    clap_mangen::Man::new(cmd)
        .source(format!("redquorum {}", env!("CARGO_PKG_VERSION")))
        .manual("redquorum")
}

/// The page with the sections of its after-help (each command's exit codes, then perhaps an
/// example) named for what they hold; clap_mangen makes them one section called EXTRA.
fn titled(roff: &str) -> String {
    roff.replace(".SH EXTRA\n", ".SH \"EXIT STATUS\"\n")
        .replace("\nExample:\n", "\n.SH EXAMPLE\n")
}
