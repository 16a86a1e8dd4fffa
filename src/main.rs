//! The `latencyd` binary: parses the command line and hands over to the
//! subcommand. Exit codes: 0 success, 1 a run-time failure, 2 bad usage,
//! 77 real-time privileges refused (daemon), 78 bad configuration.

use std::process::ExitCode;

use clap::{CommandFactory, Parser};
use latencyd::cli::{Cli, Command, CompletionShell};

fn main() -> ExitCode {
    let args = match args_as_getopt_reads_them() {
        Ok(args) => args,
        Err(code) => return code,
    };
    let cli = match Cli::try_parse_from(args) {
        Ok(cli) => cli,
        Err(err) => {
            // clap prints help and --version to stdout with status 0, and
            // usage errors to stderr with status 2.
            let _ = err.print();
            return ExitCode::from(err.exit_code().clamp(0, 255) as u8);
        }
    };
    match cli.command {
        None => latencyd::daemon::main(&cli.run),
        Some(Command::Run(args)) => latencyd::daemon::main(&args),
        Some(Command::Measure(args)) => latencyd::measure::main(&args),
        Some(Command::Oslat(args)) => latencyd::oslat::main(&args),
        Some(Command::Qualify(args)) => latencyd::qualify::main(&args),
        Some(Command::CheckConfig { file }) => latencyd::daemon::check_config(&file),
        Some(Command::Plot(args)) => latencyd::plot::main(&args),
        Some(Command::Report(args)) => latencyd::report::main(&args),
        Some(Command::Completions { shell }) => print(completions(shell)),
        Some(Command::Manpage) => print(manpage()),
        Some(Command::LoadGuard { scratch }) => latencyd::load::guard_main(&scratch),
        Some(Command::TimerlatWorkload {
            cpus,
            priority,
            tracefs,
        }) => match latencyd::cpulist::parse_cpu_list(&cpus) {
            Ok(cpus) => latencyd::instruments::timerlat::workload::main(&cpus, priority, &tracefs),
            Err(err) => {
                println!("error: --cpus {cpus:?}: {err}");
                ExitCode::from(2)
            }
        },
    }
}

/// The command line, with `measure`'s and `oslat`'s options read as
/// cyclictest's and oslat's getopt reads them (`cli::getopt`) and handed
/// on as `--name=value` words; other subcommands' unchanged. Words that
/// are not options are ignored, as both tools ignore them, and named on
/// stderr.
fn args_as_getopt_reads_them() -> Result<Vec<std::ffi::OsString>, ExitCode> {
    let args: Vec<std::ffi::OsString> = std::env::args_os().collect();
    let Some(name) = args
        .get(1)
        .and_then(|a| a.to_str())
        .filter(|a| ["measure", "oslat"].contains(a))
        .map(str::to_string)
    else {
        return Ok(args);
    };
    let (who, tool) = (
        format!("latencyd {name}"),
        if name == "oslat" {
            "oslat"
        } else {
            "cyclictest"
        },
    );
    let mut words = Vec::with_capacity(args.len());
    for arg in &args[2..] {
        match arg.to_str() {
            Some(word) => words.push(word.to_string()),
            None => {
                eprintln!(
                    "{who}: the argument {arg:?} is not valid UTF-8; write paths and values in \
                     UTF-8"
                );
                return Err(ExitCode::from(2));
            }
        }
    }
    let command = Cli::command();
    // Both are always defined; without one clap reports the subcommand.
    let Some(sub) = command.find_subcommand(&name) else {
        return Ok(args);
    };
    // Built, so that clap's own -h/--help (oslat's help) is in the table.
    let mut sub = sub.clone();
    sub.build();
    match latencyd::cli::getopt::normalize(&sub, &words) {
        Ok(read) => {
            for word in &read.ignored {
                eprintln!(
                    "{who}: ignoring '{word}': not an option ({tool} ignores such arguments too)"
                );
            }
            let mut out = args[..2].to_vec();
            out.extend(read.args.into_iter().map(Into::into));
            Ok(out)
        }
        Err(err) => {
            eprintln!("{who}: {err}\nTry '{who} --help' for the options.");
            Err(ExitCode::from(2))
        }
    }
}

/// Writes generated text to stdout: 0, or 1 when stdout cannot take it.
fn print(text: std::io::Result<Vec<u8>>) -> ExitCode {
    use std::io::Write;
    match text.and_then(|bytes| std::io::stdout().write_all(&bytes)) {
        Ok(()) => ExitCode::SUCCESS,
        Err(err) => {
            eprintln!("latencyd: cannot write the output: {err}");
            ExitCode::FAILURE
        }
    }
}

/// The completion script for `shell`, from the clap definitions.
fn completions(shell: CompletionShell) -> std::io::Result<Vec<u8>> {
    use clap_complete::{Shell, generate};
    let shell = match shell {
        CompletionShell::Bash => Shell::Bash,
        CompletionShell::Zsh => Shell::Zsh,
        CompletionShell::Fish => Shell::Fish,
    };
    let mut out = Vec::new();
    generate(shell, &mut Cli::command(), "latencyd", &mut out);
    Ok(out)
}

/// latencyd(8): the top-level page (name, synopsis, description, options,
/// commands), then each visible command's synopsis and options, then exit
/// status and files.
fn manpage() -> std::io::Result<Vec<u8>> {
    use clap_mangen::Man;
    let cli = Cli::command();
    let mut out = Vec::new();
    // clap_mangen's own SUBCOMMANDS section would name a page per command
    // (latencyd-run(8), ...); the commands are sections of this one page.
    let top = Man::new(cli.clone()).section("8");
    top.render_title(&mut out)?;
    top.render_name_section(&mut out)?;
    top.render_synopsis_section(&mut out)?;
    top.render_description_section(&mut out)?;
    top.render_options_section(&mut out)?;
    out.extend_from_slice(b".SH COMMANDS\n");
    for sub in cli.get_subcommands().filter(|s| !s.is_hide_set()) {
        let about = sub.get_about().map(|a| a.to_string()).unwrap_or_default();
        let name = sub.get_name();
        out.extend_from_slice(
            format!(
                ".TP\n\\fBlatencyd {name}\\fR\n{}; see LATENCYD {} below\n",
                roff_text(&about),
                name.to_uppercase(),
            )
            .as_bytes(),
        );
    }
    top.render_version_section(&mut out)?;
    for sub in cli.get_subcommands().filter(|s| !s.is_hide_set()) {
        let name = format!("latencyd {}", sub.get_name());
        out.extend_from_slice(format!(".SH \"{}\"\n", name.to_uppercase()).as_bytes());
        if let Some(about) = sub.get_long_about().or(sub.get_about()) {
            out.extend_from_slice(format!("{}\n", roff_text(&about.to_string())).as_bytes());
        }
        // The command's synopsis and options as subsections of its own.
        let page = Man::new(sub.clone().bin_name(name));
        let mut part = Vec::new();
        page.render_synopsis_section(&mut part)?;
        page.render_options_section(&mut part)?;
        for line in String::from_utf8_lossy(&part).lines() {
            let line = line
                .strip_prefix(".SH ")
                .map_or_else(|| line.to_string(), |t| format!(".SS {t}"));
            out.extend_from_slice(line.as_bytes());
            out.push(b'\n');
        }
    }
    out.extend_from_slice(MANPAGE_TAIL.as_bytes());
    Ok(out)
}

/// Plain text made safe for a roff paragraph.
fn roff_text(text: &str) -> String {
    text.lines()
        .map(|line| {
            let line = line.replace('\\', "\\e");
            match line.chars().next() {
                Some('.' | '\'') => format!("\\&{line}"),
                _ => line,
            }
        })
        .collect::<Vec<_>>()
        .join("\n")
}

const MANPAGE_TAIL: &str = r#".SH "EXIT STATUS"
.TP
0
success
.TP
1
a sampler died, or another run-time failure
.TP
2
bad usage
.TP
77
real-time privileges refused (realtime.required = true)
.TP
78
bad configuration
.SH FILES
.TP
/etc/latencyd/latencyd.toml
the configuration (every key: /usr/share/doc/latencyd/examples/config.example.toml)
.TP
/var/lib/latencyd/record
the record: every CPU's histogram of every interval
.TP
/usr/share/latencyd
dashboards, alert rules, systemd drop-ins and the udev rule
.SH "SEE ALSO"
cyclictest(8), systemd.exec(5), /usr/share/doc/latencyd/README.md, /usr/share/doc/latencyd/docs/
"#;
