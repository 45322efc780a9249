//! A bounded HTML parse: linear in the page's size, stopped at a deadline, and never deeper
//! than [`MAX_DEPTH`] open elements.
//!
//! html5ever's tree builder scans its stack of open elements for many start tags ("is there a
//! `p` in button scope?"), so a page of 200,000 nested `<div>` costs time quadratic in the
//! depth; every later walk of a deep tree risks the thread's stack. [`DepthCap`] sits between
//! the tokenizer and the tree builder: once the builder holds [`MAX_DEPTH`] handles (open
//! elements plus active formatting elements, read from the builder itself), further start
//! tags — and the end tags that close them — are dropped, their text kept. The tree it builds
//! is at most about twice [`MAX_DEPTH`] deep, and [`serialize_with`] writes a subtree back
//! as HTML no deeper than that, iteratively, for the markdown converter.

use std::cell::{Cell, RefCell};
use std::collections::HashMap;
use tokio::time::Instant;

use html5ever::tendril::StrTendril;
use html5ever::tokenizer::{
    BufferQueue, Tag, TagKind, Token, TokenSink, TokenSinkResult, Tokenizer, TokenizerOpts,
};
use html5ever::tree_builder::{Tracer, TreeBuilder, TreeBuilderOpts};
use html5ever::{LocalName, TokenizerResult};
#[cfg(any(test, fuzzing))]
use scraper::ElementRef;
use scraper::{Html, HtmlTreeSink, Node};

/// Open elements (plus active formatting elements) the tree builder may hold. Real pages stay
/// well under 100; past this, markup is dropped and only text is kept.
#[cfg_attr(fuzzing, visibility::make(pub))]
pub(crate) const MAX_DEPTH: usize = 256;

/// Input fed to the tokenizer between two deadline checks.
const CHUNK_BYTES: usize = 64 * 1024;

/// Tokens between two deadline checks inside one chunk.
const TOKENS_PER_CHECK: u32 = 4096;

/// The parse ran past its deadline.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(fuzzing, visibility::make(pub))]
pub(crate) struct DeadlineExceeded;

type Builder = TreeBuilder<ego_tree::NodeId, HtmlTreeSink>;

/// Parse `html` as a document, bounded in depth and stopped at `deadline`.
#[cfg_attr(fuzzing, visibility::make(pub))]
pub(crate) fn parse_document(html: &str, deadline: Instant) -> Result<Html, DeadlineExceeded> {
    let builder = TreeBuilder::new(
        HtmlTreeSink::new(Html::new_document()),
        TreeBuilderOpts::default(),
    );
    let tokenizer = Tokenizer::new(DepthCap::new(builder, deadline), TokenizerOpts::default());
    let input = BufferQueue::default();
    let mut rest = html;
    while !rest.is_empty() {
        let cut = floor_char_boundary(rest, CHUNK_BYTES);
        let (chunk, tail) = rest.split_at(cut);
        rest = tail;
        input.push_back(StrTendril::from_slice(chunk));
        feed_all(&tokenizer, &input);
        if tokenizer.sink.expired.get() || Instant::now() >= deadline {
            return Err(DeadlineExceeded);
        }
    }
    tokenizer.end();
    Ok(tokenizer.sink.builder.sink.0.into_inner())
}

/// Feed everything queued in `input` to the tokenizer. The tokenizer stops early for a
/// `<script>` (nothing runs here) and for an encoding indicator (`<meta charset>`: the body
/// was decoded before the parse, by the HTTP charset, a BOM or the WHATWG prescan, so the
/// indicator changes nothing); either way feeding resumes until the queue is drained. Taking
/// such a stop for the end of the input would lose the rest of the page.
fn feed_all(tokenizer: &Tokenizer<DepthCap>, input: &BufferQueue) {
    loop {
        match tokenizer.feed(input) {
            TokenizerResult::Done => break,
            TokenizerResult::Script(_) | TokenizerResult::EncodingIndicator(_) => {}
        }
    }
    debug_assert!(input.is_empty(), "the tokenizer left input unread");
}

/// The largest char boundary of `s` at or below `max` (at least one char, so input advances).
fn floor_char_boundary(s: &str, max: usize) -> usize {
    if s.len() <= max {
        return s.len();
    }
    let mut cut = max;
    while !s.is_char_boundary(cut) {
        cut -= 1;
    }
    if cut == 0 {
        s.char_indices().nth(1).map_or(s.len(), |(i, _)| i)
    } else {
        cut
    }
}

/// The token filter between the tokenizer and the tree builder.
struct DepthCap {
    builder: Builder,
    deadline: Instant,
    /// Handles the builder held at the last count.
    held: Cell<usize>,
    /// Start tags forwarded since the last count.
    since_count: Cell<usize>,
    /// Whether any token reached the builder since the last count (text can reopen formatting
    /// elements, end tags close them); while only dropping, the count cannot change.
    forwarded: Cell<bool>,
    /// Start tags dropped per name, so their end tags are dropped too.
    dropped: RefCell<HashMap<LocalName, u32>>,
    /// A raw-text element (script, style, textarea, …) whose start tag was dropped: its text
    /// is dropped up to its end tag.
    raw: RefCell<Option<LocalName>>,
    tokens: Cell<u32>,
    expired: Cell<bool>,
}

impl DepthCap {
    fn new(builder: Builder, deadline: Instant) -> Self {
        Self {
            builder,
            deadline,
            held: Cell::new(0),
            since_count: Cell::new(0),
            forwarded: Cell::new(true),
            dropped: RefCell::new(HashMap::new()),
            raw: RefCell::new(None),
            tokens: Cell::new(0),
            expired: Cell::new(false),
        }
    }

    /// Whether the builder may take one more start tag. Counting the builder's handles costs
    /// their number, so it is done every 16 forwarded start tags while far from the cap, at
    /// every one near it (at most `MAX_DEPTH` steps per tag), and never while the builder has
    /// been sent nothing since the last count.
    fn has_room(&self) -> bool {
        let since = self.since_count.get();
        let estimate = self.held.get() + since;
        if self.forwarded.get() && (since >= 16 || estimate >= MAX_DEPTH / 2) {
            self.forwarded.set(false);
            let counter = HandleCount(Cell::new(0));
            self.builder.trace_handles(&counter);
            self.held.set(counter.0.get());
            self.since_count.set(0);
        }
        self.held.get() < MAX_DEPTH
    }

    /// Forward `tag` to the builder (`None`), or drop it and say what the tokenizer does next.
    fn drop_tag(&self, tag: &Tag) -> Option<TokenSinkResult<ego_tree::NodeId>> {
        match tag.kind {
            TagKind::StartTag if self.has_room() => {
                self.since_count.set(self.since_count.get() + 1);
                None
            }
            TagKind::StartTag => {
                if !tag.self_closing {
                    *self
                        .dropped
                        .borrow_mut()
                        .entry(tag.name.clone())
                        .or_insert(0) += 1;
                }
                // The builder would switch the tokenizer into the element's text state; a
                // dropped one is switched here so its text is not read as markup.
                if !tag.self_closing
                    && let Some(state) = raw_kind(&tag.name)
                {
                    *self.raw.borrow_mut() = Some(tag.name.clone());
                    return Some(state);
                }
                Some(TokenSinkResult::Continue)
            }
            TagKind::EndTag => {
                let mut raw = self.raw.borrow_mut();
                if raw.as_ref() == Some(&tag.name) {
                    *raw = None;
                }
                let mut dropped = self.dropped.borrow_mut();
                match dropped.get_mut(&tag.name) {
                    Some(n) if *n > 0 => {
                        *n -= 1;
                        Some(TokenSinkResult::Continue)
                    }
                    _ => None,
                }
            }
        }
    }
}

/// The tokenizer state the tree builder switches to after the start tag `name`.
fn raw_kind(name: &LocalName) -> Option<TokenSinkResult<ego_tree::NodeId>> {
    use html5ever::tokenizer::states::RawKind;
    let kind = match &**name {
        "title" | "textarea" => RawKind::Rcdata,
        "style" | "xmp" | "iframe" | "noembed" | "noframes" | "noscript" => RawKind::Rawtext,
        "script" => RawKind::ScriptData,
        "plaintext" => return Some(TokenSinkResult::Plaintext),
        _ => return None,
    };
    Some(TokenSinkResult::RawData(kind))
}

impl TokenSink for DepthCap {
    type Handle = ego_tree::NodeId;

    fn process_token(&self, token: Token, line_number: u64) -> TokenSinkResult<Self::Handle> {
        if self.expired.get() {
            return TokenSinkResult::Continue;
        }
        let n = self.tokens.get().wrapping_add(1);
        self.tokens.set(n);
        if n.is_multiple_of(TOKENS_PER_CHECK) && Instant::now() >= self.deadline {
            self.expired.set(true);
            return TokenSinkResult::Continue;
        }
        match &token {
            Token::TagToken(tag) => {
                if let Some(next) = self.drop_tag(tag) {
                    return next;
                }
            }
            Token::CharacterTokens(_) | Token::NullCharacterToken
                if self.raw.borrow().is_some() =>
            {
                return TokenSinkResult::Continue;
            }
            _ => {}
        }
        self.forwarded.set(true);
        self.builder.process_token(token, line_number)
    }

    fn end(&self) {
        self.builder.end();
    }

    fn adjusted_current_node_present_but_not_in_html_namespace(&self) -> bool {
        self.builder
            .adjusted_current_node_present_but_not_in_html_namespace()
    }
}

struct HandleCount(Cell<usize>);

impl Tracer for HandleCount {
    type Handle = ego_tree::NodeId;

    fn trace_handle(&self, _node: &Self::Handle) {
        self.0.set(self.0.get() + 1);
    }
}

/// Elements with no end tag.
const VOID: &[&str] = &[
    "area", "base", "br", "col", "embed", "hr", "img", "input", "link", "meta", "source", "track",
    "wbr",
];

/// Write `root` and its subtree back as HTML, without the subtrees of elements named in
/// `dropped`, and with the markup of elements deeper than `max_depth` below `root` left out
/// (their text kept). Iterative: any depth is safe.
#[cfg(test)]
pub(crate) fn serialize_capped(root: ElementRef<'_>, dropped: &[&str], max_depth: usize) -> String {
    let mut out = String::new();
    serialize_filtered(
        &mut out,
        *root,
        |node| matches!(node.value(), Node::Element(el) if dropped.contains(&el.name())),
        max_depth,
    );
    out
}

/// Write `root` and its subtree back as HTML to `out`, without the subtrees `drop` chooses and
/// with the markup deeper than `max_depth` below `root` left out (its text kept).
pub(crate) fn serialize_filtered(
    out: &mut String,
    root: ego_tree::NodeRef<'_, Node>,
    drop: impl Fn(&ego_tree::NodeRef<'_, Node>) -> bool,
    max_depth: usize,
) {
    serialize_with(
        out,
        root,
        |node| {
            if drop(node) {
                Markup::Drop
            } else {
                Markup::Keep
            }
        },
        max_depth,
    );
}

/// What [`serialize_with`] writes for an element.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Markup {
    /// The element as it is.
    Keep,
    /// Nothing of it: neither the element nor its subtree.
    Drop,
    /// Its content without the element's own tags (a link kept as its text).
    Unwrap,
    /// The element with these attributes instead of its own.
    Attrs(Vec<(&'static str, String)>),
}

/// [`serialize_filtered`] with a [`Markup`] decision per element (asked once per element, in
/// document order), appended to `out`.
pub(crate) fn serialize_with(
    out: &mut String,
    root: ego_tree::NodeRef<'_, Node>,
    mut markup: impl FnMut(&ego_tree::NodeRef<'_, Node>) -> Markup,
    max_depth: usize,
) {
    use ego_tree::iter::Edge;
    let mut depth = 0usize;
    // While inside a dropped subtree: the node that opened it.
    let mut skipping: Option<ego_tree::NodeId> = None;
    // Elements written without their tags.
    let mut unwrapped: Vec<ego_tree::NodeId> = Vec::new();
    for edge in root.traverse() {
        match edge {
            Edge::Open(node) => {
                if skipping.is_some() {
                    continue;
                }
                match node.value() {
                    Node::Element(el) => {
                        let name = el.name();
                        let attrs = match markup(&node) {
                            Markup::Drop => {
                                skipping = Some(node.id());
                                continue;
                            }
                            Markup::Unwrap => {
                                unwrapped.push(node.id());
                                continue;
                            }
                            Markup::Keep => None,
                            Markup::Attrs(attrs) => Some(attrs),
                        };
                        depth += 1;
                        if depth <= max_depth {
                            out.push('<');
                            out.push_str(name);
                            let mut attr = |key: &str, value: &str| {
                                out.push(' ');
                                out.push_str(key);
                                out.push_str("=\"");
                                escape_into(out, value, true);
                                out.push('"');
                            };
                            match &attrs {
                                Some(attrs) => attrs.iter().for_each(|(k, v)| attr(k, v)),
                                None => el.attrs().for_each(|(k, v)| attr(k, v)),
                            }
                            out.push('>');
                            if bare_pre(&node) {
                                out.push_str("<code>");
                            }
                        }
                    }
                    Node::Text(text) => escape_into(out, text, false),
                    _ => {}
                }
            }
            Edge::Close(node) => {
                if let Some(id) = skipping {
                    if id == node.id() {
                        skipping = None;
                    }
                    continue;
                }
                if unwrapped.last() == Some(&node.id()) {
                    unwrapped.pop();
                    continue;
                }
                if let Node::Element(el) = node.value() {
                    if depth <= max_depth && !VOID.contains(&el.name()) {
                        if bare_pre(&node) {
                            out.push_str("</code>");
                        }
                        out.push_str("</");
                        out.push_str(el.name());
                        out.push('>');
                    }
                    depth -= 1;
                }
            }
        }
    }
}

/// A `<pre>` with no `<code>` child: written as `<pre><code>` so it becomes a fenced block.
fn bare_pre(node: &ego_tree::NodeRef<'_, Node>) -> bool {
    matches!(node.value(), Node::Element(el) if el.name() == "pre")
        && !node
            .children()
            .any(|c| matches!(c.value(), Node::Element(el) if el.name() == "code"))
}

fn escape_into(out: &mut String, s: &str, attribute: bool) {
    for c in s.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' if !attribute => out.push_str("&lt;"),
            '>' if !attribute => out.push_str("&gt;"),
            '"' if attribute => out.push_str("&quot;"),
            '\u{a0}' => out.push_str("&nbsp;"),
            c => out.push(c),
        }
    }
}

/// Depth of the deepest element under `root`, counted iteratively (for the tests and the fuzz
/// target).
#[cfg(any(test, fuzzing))]
#[cfg_attr(fuzzing, visibility::make(pub))]
pub(crate) fn max_element_depth(root: ElementRef<'_>) -> usize {
    use ego_tree::iter::Edge;
    let (mut depth, mut max) = (0usize, 0usize);
    for edge in root.traverse() {
        match edge {
            Edge::Open(node) if node.value().is_element() => {
                depth += 1;
                max = max.max(depth);
            }
            Edge::Close(node) if node.value().is_element() => depth -= 1,
            _ => {}
        }
    }
    max
}
