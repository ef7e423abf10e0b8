//! Command templates: a command line written as one string, split into argv without a shell,
//! with `{placeholder}`s filled in after the split.
//!
//! The split follows the POSIX shell's word rules for the parts a command line needs: blanks
//! separate words; `'...'` keeps everything literally; `"..."` keeps everything but `\"` and
//! `\\`; a backslash outside quotes keeps the next character (and joins lines). Nothing else of
//! a shell exists here: an unquoted `|`, `&`, `;`, `<`, `>`, `(`, `)`, a `#` that starts a word,
//! and any `$` or backquote are refused rather than passed on, so that a recipe never looks as
//! if it pipes, redirects or expands a variable when it cannot. Globs and `~` are passed as
//! they are.
//!
//! Placeholders are replaced after the split, inside quotes too, and a value always stays inside
//! the one argument it was written in: a checkpoint path with a space is still one argument.
//! `{extra_args}` is the one exception: it must be a word of its own, and becomes zero or more
//! arguments. A brace that does not open `{identifier}` is literal (JSON passes unchanged);
//! an identifier the template does not allow is an error.
//!
//! No crate does this in the workspace: `shlex` is in `Cargo.lock` only as a build dependency
//! of `cc`, and it splits without telling quoted from unquoted text, which the refusal of
//! shell syntax above needs.

use std::fmt;

/// A value a template may ask for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Placeholder {
    /// `{checkpoint}`: the checkpoint's path as the server sees it.
    Checkpoint,
    /// `{port}`: the port the runner allocated for the server.
    Port,
    /// `{tp}`: the recipe's tensor parallelism.
    Tp,
    /// `{extra_args}`: the arguments the runner adds (the monokernel flag on that side).
    ExtraArgs,
    /// `{output}`: the file a kernel timing script writes its JSON to.
    Output,
    /// `{results}`: the directory an external accuracy or speed command writes its results in.
    Results,
    /// `{concurrency}`: the concurrency of an external speed run.
    Concurrency,
    /// `{input_len}`: input tokens per request of an external speed run.
    InputLen,
    /// `{output_len}`: output tokens per request of an external speed run.
    OutputLen,
    /// `{requests}`: measured requests of an external speed run.
    Requests,
    /// `{warmup}`: warm-up requests of an external speed run.
    Warmup,
    /// `{host}`: the address of the node a topology's server runs on.
    Host,
    /// `{bootstrap_port}`: a prefill instance's bootstrap port.
    BootstrapPort,
    /// `{nnodes}`: the nodes a topology's instance spans.
    Nnodes,
    /// `{node_rank}`: this node's rank among its instance's nodes.
    NodeRank,
    /// `{seed}`: an accuracy repeat's seed (repeat `r` runs with seed `r`).
    Seed,
    /// `{dist_init_addr}`: `host:port` of an instance's rank 0, where its nodes meet.
    DistInitAddr,
    /// `{metrics_port}`: a second port of the router's, for its metrics (sglang-router's
    /// `--prometheus-port`; its default, 29000, is one port for every router of the node).
    MetricsPort,
}

impl Placeholder {
    /// The name written between the braces.
    pub fn name(self) -> &'static str {
        match self {
            Placeholder::Checkpoint => "checkpoint",
            Placeholder::Port => "port",
            Placeholder::Tp => "tp",
            Placeholder::ExtraArgs => "extra_args",
            Placeholder::Output => "output",
            Placeholder::Results => "results",
            Placeholder::Concurrency => "concurrency",
            Placeholder::InputLen => "input_len",
            Placeholder::OutputLen => "output_len",
            Placeholder::Requests => "requests",
            Placeholder::Warmup => "warmup",
            Placeholder::Host => "host",
            Placeholder::BootstrapPort => "bootstrap_port",
            Placeholder::Nnodes => "nnodes",
            Placeholder::NodeRank => "node_rank",
            Placeholder::DistInitAddr => "dist_init_addr",
            Placeholder::MetricsPort => "metrics_port",
            Placeholder::Seed => "seed",
        }
    }
}

impl fmt::Display for Placeholder {
    fn fmt(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(formatter, "{{{}}}", self.name())
    }
}

/// A command line split into words, its placeholders found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Template {
    text: String,
    words: Vec<Word>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum Word {
    /// `{extra_args}` alone: zero or more arguments.
    Extra,
    /// One argument made of literal text and placeholders.
    Parts(Vec<Part>),
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum Part {
    Text(String),
    Slot(Placeholder),
}

/// Why a command line was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TemplateError {
    #[error("is empty: write the command and its arguments")]
    Empty,
    #[error("has an unclosed {0} quote")]
    UnclosedQuote(char),
    #[error("ends in a backslash that escapes nothing")]
    TrailingBackslash,
    #[error(
        "uses the shell's '{0}', but no shell runs this command\n\
         hint: write it inside single quotes to pass it as a literal character"
    )]
    ShellSyntax(char),
    #[error("has the unknown placeholder {{{name}}}; this key allows {allowed}")]
    UnknownPlaceholder { name: String, allowed: String },
    #[error("has {{extra_args}} inside a word; it must be a word of its own")]
    ExtraArgsInWord,
    #[error("has {{extra_args}} more than once")]
    ExtraArgsTwice,
    #[error("lacks {0}, which it must use")]
    Missing(Placeholder),
}

impl Template {
    /// Splits `text` and finds its placeholders. `allowed` lists those it may use and
    /// `required` those it must.
    pub(crate) fn parse(
        text: &str,
        allowed: &[Placeholder],
        required: &[Placeholder],
    ) -> Result<Template, TemplateError> {
        let words = split(text)?;
        if words.is_empty() {
            return Err(TemplateError::Empty);
        }
        let mut parsed = Vec::with_capacity(words.len());
        for word in words {
            let parts = find_placeholders(&word, allowed)?;
            let extra = Part::Slot(Placeholder::ExtraArgs);
            if parts == [extra.clone()] {
                if parsed.contains(&Word::Extra) {
                    return Err(TemplateError::ExtraArgsTwice);
                }
                parsed.push(Word::Extra);
            } else if parts.contains(&extra) {
                return Err(TemplateError::ExtraArgsInWord);
            } else {
                parsed.push(Word::Parts(parts));
            }
        }
        let template = Template { text: text.to_owned(), words: parsed };
        if let Some(missing) = required.iter().find(|placeholder| !template.uses(**placeholder)) {
            return Err(TemplateError::Missing(*missing));
        }
        Ok(template)
    }

    /// The command line as written.
    pub(crate) fn text(&self) -> &str {
        &self.text
    }

    /// The words that are only literal text.
    pub(crate) fn literal_words(&self) -> impl Iterator<Item = &str> {
        self.words.iter().filter_map(|word| match word {
            Word::Parts(parts) => match parts.as_slice() {
                [Part::Text(text)] => Some(text.as_str()),
                _ => None,
            },
            Word::Extra => None,
        })
    }

    /// The words that are only literal text, to be rewritten in place.
    pub(crate) fn literal_words_mut(&mut self) -> impl Iterator<Item = &mut String> {
        self.words.iter_mut().filter_map(|word| match word {
            Word::Parts(parts) => match parts.as_mut_slice() {
                [Part::Text(text)] => Some(text),
                _ => None,
            },
            Word::Extra => None,
        })
    }

    /// Replaces `old` by `new` in the text as written, wherever `old` is a whole blank-separated
    /// word of it (written unquoted); the words themselves are not touched.
    pub(crate) fn replace_unquoted_word(&mut self, old: &str, new: &str) {
        let mut text = String::with_capacity(self.text.len());
        let mut rest = self.text.as_str();
        while !rest.is_empty() {
            let blank = rest.find(|c: char| !c.is_ascii_whitespace()).unwrap_or(rest.len());
            text.push_str(&rest[..blank]);
            rest = &rest[blank..];
            let end = rest.find(|c: char| c.is_ascii_whitespace()).unwrap_or(rest.len());
            text.push_str(if &rest[..end] == old { new } else { &rest[..end] });
            rest = &rest[end..];
        }
        self.text = text;
    }

    /// Whether the template uses `placeholder` anywhere.
    pub(crate) fn uses(&self, placeholder: Placeholder) -> bool {
        self.words.iter().any(|word| match word {
            Word::Extra => placeholder == Placeholder::ExtraArgs,
            Word::Parts(parts) => parts.contains(&Part::Slot(placeholder)),
        })
    }

    /// The argv: each placeholder replaced by `value(placeholder)`, and `extra` where
    /// `{extra_args}` stands, or after the last word when it stands nowhere.
    pub(crate) fn expand(
        &self,
        value: impl Fn(Placeholder) -> String,
        extra: &[String],
    ) -> Vec<String> {
        let mut argv = Vec::with_capacity(self.words.len() + extra.len());
        for word in &self.words {
            match word {
                Word::Extra => argv.extend_from_slice(extra),
                Word::Parts(parts) => argv.push(
                    parts
                        .iter()
                        .map(|part| match part {
                            Part::Text(text) => text.clone(),
                            Part::Slot(placeholder) => value(*placeholder),
                        })
                        .collect(),
                ),
            }
        }
        if !self.words.contains(&Word::Extra) {
            argv.extend_from_slice(extra);
        }
        argv
    }
}

/// Splits a command line into words with the shell's quoting rules, refusing the rest of its
/// syntax.
fn split(text: &str) -> Result<Vec<String>, TemplateError> {
    let mut words = Vec::new();
    let mut word: Option<String> = None;
    let mut chars = text.chars();
    while let Some(char) = chars.next() {
        match char {
            ' ' | '\t' | '\n' | '\r' => words.extend(word.take()),
            '\'' => {
                let word = word.get_or_insert_default();
                loop {
                    match chars.next() {
                        Some('\'') => break,
                        Some(char) => word.push(char),
                        None => return Err(TemplateError::UnclosedQuote('\'')),
                    }
                }
            }
            '"' => {
                let word = word.get_or_insert_default();
                loop {
                    match chars.next() {
                        Some('"') => break,
                        Some('\\') => match chars.next() {
                            Some(char @ ('"' | '\\')) => word.push(char),
                            Some('\n') => {}
                            Some(char @ ('$' | '`')) => {
                                return Err(TemplateError::ShellSyntax(char));
                            }
                            Some(char) => {
                                word.push('\\');
                                word.push(char);
                            }
                            None => return Err(TemplateError::UnclosedQuote('"')),
                        },
                        Some(char @ ('$' | '`')) => return Err(TemplateError::ShellSyntax(char)),
                        Some(char) => word.push(char),
                        None => return Err(TemplateError::UnclosedQuote('"')),
                    }
                }
            }
            '\\' => match chars.next() {
                Some('\n') => {}
                Some(char) => word.get_or_insert_default().push(char),
                None => return Err(TemplateError::TrailingBackslash),
            },
            '|' | '&' | ';' | '<' | '>' | '(' | ')' | '$' | '`' => {
                return Err(TemplateError::ShellSyntax(char));
            }
            '#' if word.is_none() => return Err(TemplateError::ShellSyntax(char)),
            char => word.get_or_insert_default().push(char),
        }
    }
    words.extend(word);
    Ok(words)
}

/// Cuts one word into literal text and placeholders.
fn find_placeholders(word: &str, allowed: &[Placeholder]) -> Result<Vec<Part>, TemplateError> {
    let mut parts = Vec::new();
    let mut text = String::new();
    let mut rest = word;
    while let Some(open) = rest.find('{') {
        let after = &rest[open + 1..];
        let name_len = after
            .find(|char: char| !(char.is_ascii_alphanumeric() || char == '_'))
            .unwrap_or(after.len());
        let name = &after[..name_len];
        let is_slot = after[name_len..].starts_with('}')
            && name.starts_with(|char: char| char.is_ascii_alphabetic() || char == '_');
        if !is_slot {
            text.push_str(&rest[..=open]);
            rest = after;
            continue;
        }
        let placeholder =
            allowed.iter().copied().find(|placeholder| placeholder.name() == name).ok_or_else(
                || TemplateError::UnknownPlaceholder {
                    name: name.to_owned(),
                    allowed: describe_allowed(allowed),
                },
            )?;
        text.push_str(&rest[..open]);
        if !text.is_empty() {
            parts.push(Part::Text(std::mem::take(&mut text)));
        }
        parts.push(Part::Slot(placeholder));
        rest = &after[name_len + 1..];
    }
    text.push_str(rest);
    if !text.is_empty() || parts.is_empty() {
        parts.push(Part::Text(text));
    }
    Ok(parts)
}

fn describe_allowed(allowed: &[Placeholder]) -> String {
    if allowed.is_empty() {
        return "no placeholders".to_owned();
    }
    let names: Vec<String> = allowed.iter().map(ToString::to_string).collect();
    names.join(", ")
}

#[cfg(test)]
mod tests {
    use super::*;

    const SERVER: [Placeholder; 4] =
        [Placeholder::Checkpoint, Placeholder::Port, Placeholder::Tp, Placeholder::ExtraArgs];

    /// Parses `text` as a server command and expands it with a checkpoint path that has a
    /// space in it and two extra arguments; renders argv one argument per line in brackets, or
    /// the error.
    fn check(text: &str) -> String {
        match Template::parse(text, &SERVER, &[Placeholder::Port]) {
            Ok(template) => {
                let extra = ["--enable-amd-monokernel".to_owned(), "a b".to_owned()];
                let argv = template.expand(
                    |placeholder| match placeholder {
                        Placeholder::Checkpoint => "/models/My Model".to_owned(),
                        Placeholder::Port => "30001".to_owned(),
                        Placeholder::Tp => "8".to_owned(),
                        other => unreachable!("not a server placeholder: {other}"),
                    },
                    &extra,
                );
                argv.iter().map(|arg| format!("[{arg}]")).collect::<Vec<_>>().join(" ")
            }
            Err(error) => format!("error: {error}"),
        }
    }

    #[test]
    fn commands_split_and_expand_without_a_shell() {
        let cases = [
            "python -m sglang.launch_server --model-path {checkpoint} --port {port} --tp {tp}",
            "serve --port={port} {extra_args} --last",
            "serve --port {port} '--chat-template' \"with space\" it\\'s",
            "serve --port {port} --json-model-override-args '{\"rope\": {\"factor\": 2}}'",
            "serve --port {port} --name \"{checkpoint}/sub dir\" '{tp}'",
            "serve \\\n  --port {port}\\\n  --tp {tp}",
            "serve --port {port} '' \"\" x''y",
            "serve --port {port} \"a\\\\b \\\"q\\\" \\n\"",
            "serve --port {port} --glob *.py ~/x a#b",
            "serve --port {port} {}",
        ];
        let rendered: Vec<String> =
            cases.iter().map(|text| format!("{text}\n=> {}", check(text))).collect();
        insta::assert_snapshot!(rendered.join("\n\n"));
    }

    #[test]
    fn every_kind_of_template_error() {
        let cases = [
            "",
            "   \n ",
            "serve --port {port} 'open",
            "serve --port {port} \"open",
            "serve --port {port} \\",
            "serve --port {port} | tee log",
            "serve --port {port} > log",
            "serve --port {port} && rm -rf /",
            "serve --port {port} ; echo",
            "serve --port $PORT",
            "serve --port {port} \"$HOME\"",
            "serve --port {port} `id`",
            "serve --port {port} # comment",
            "serve --port {port} --model {model}",
            "serve --port {port} --out {output}",
            "serve --port {port} --x={extra_args}",
            "serve --port {port} {extra_args} {extra_args}",
            "serve --tp {tp}",
        ];
        let rendered: Vec<String> =
            cases.iter().map(|text| format!("{text:?}\n=> {}", check(text))).collect();
        insta::assert_snapshot!(rendered.join("\n\n"));
    }

    #[test]
    fn a_template_without_placeholders_allows_none() {
        let error = Template::parse("--flag {tp}", &[], &[]).err().map(|error| error.to_string());
        assert_eq!(
            error.as_deref(),
            Some("has the unknown placeholder {tp}; this key allows no placeholders")
        );
    }
}
