//! The page's main content: which subtrees of a parsed page hold the article, and which
//! nodes inside them are boilerplate.
//!
//! The method is the one Readability made standard, on the bounded tree and without
//! recursion: boilerplate containers are set aside by tag, role, visibility and class/id;
//! every paragraph-like block scores its ancestors by its length and commas; the best
//! container (scaled by how much of its text is link text) is chosen, widened to an ancestor
//! where the content is split across siblings, joined by siblings that score well or read as
//! prose, and then cleaned: lists, tables and boxes that are mostly links, forms, images or
//! too short for prose are dropped. The page's first `<h1>` leads when the chosen content
//! does not hold it.
//!
//! Every walk is an iterative traversal of the tree [`super::bounded`] built (at most about
//! twice [`super::bounded::MAX_DEPTH`] deep); per-node facts live in one map.

use std::collections::{HashMap, HashSet};

use ego_tree::iter::Edge;
use ego_tree::{NodeId, NodeRef};
use scraper::{Html, Node};

/// Elements that never carry page text (`label`: a form control's name, and the controls are
/// never written).
pub(crate) const NEVER_TEXT: &[&str] = &[
    "script", "style", "noscript", "template", "svg", "iframe", "object", "embed", "head",
    "canvas", "select", "option", "button", "input", "textarea", "dialog", "map", "link", "meta",
    "label",
];

/// Page chrome by tag.
pub(crate) const CHROME: &[&str] = &["nav", "footer", "aside", "menu"];

/// Roles that mark chrome.
const CHROME_ROLES: &[&str] = &[
    "navigation",
    "menu",
    "menubar",
    "complementary",
    "contentinfo",
    "banner",
    "search",
    "alert",
    "alertdialog",
    "dialog",
    "toolbar",
];

/// Class/id words of boxes that are chrome (Readability's list, and cookie banners, newsletters, recommendation widgets).
const UNLIKELY: &[&str] = &[
    "-ad-",
    "ai2html",
    "banner",
    "breadcrumb",
    "combx",
    "comment",
    "community",
    "cover-wrap",
    "disqus",
    "extra",
    "footer",
    "gdpr",
    "header",
    "legends",
    "menu",
    "related",
    "remark",
    "replies",
    "rss",
    "shoutbox",
    "sidebar",
    "skyscraper",
    "social",
    "sponsor",
    "supplemental",
    "ad-break",
    "agegate",
    "pagination",
    "pager",
    "popup",
    "yom-remote",
    "cookie",
    "consent",
    "newsletter",
    "subscribe",
    "byline-tools",
    "toolbar",
    "masthead",
    "navbar",
    "topbar",
    "skip-link",
    "signup",
    "outbrain",
    "taboola",
    "recommend",
    "trending",
    "most-popular",
    "mostpopular",
    "author-bio",
    "tags",
    "tagcloud",
    "widget",
];
/// Class/id words that keep a box that also has an [`UNLIKELY`] word.
const MAYBE: &[&str] = &[
    "and",
    "article",
    "body",
    "column",
    "content",
    "main",
    "mathjax",
    "shadow",
    "story",
    "entry",
    "post-text",
    "text",
];
/// Class/id words of readers' comments: set aside even beside a [`MAYBE`] word
/// (`commentBody`, `comment-text`), unless the box also names the article itself.
const COMMENTS: &[&str] = &[
    "comment",
    "disqus",
    "replies",
    "respond",
    "talkback",
    "reactions",
];
/// Class/id words that name the article itself.
const PRIMARY: &[&str] = &["article", "main"];
/// Class/id words of content (+25).
const POSITIVE: &[&str] = &[
    "article",
    "body",
    "content",
    "entry",
    "hentry",
    "h-entry",
    "main",
    "page",
    "post",
    "text",
    "blog",
    "story",
    "prose",
    "rich-text",
    "article-text",
];
/// Class/id words of chrome (−25); a `hid` class word counts too.
const NEGATIVE: &[&str] = &[
    "-ad-",
    "banner",
    "combx",
    "comment",
    "com-",
    "contact",
    "footer",
    "gdpr",
    "masthead",
    "media",
    "meta",
    "outbrain",
    "promo",
    "related",
    "scroll",
    "share",
    "shoutbox",
    "sidebar",
    "skyscraper",
    "sponsor",
    "shopping",
    "tags",
    "widget",
    "social",
    "newsletter",
    "subscribe",
    "nav",
    "menu",
    "breadcrumb",
    "byline",
    "caption",
    "credit",
    "disclaimer",
];

/// Whether the lowercased `marks` contain any of `words`.
fn has_any(marks: &str, words: &[&str]) -> bool {
    words.iter().any(|w| marks.contains(w))
}

/// What was chosen: the roots to convert, in document order, and the nodes inside them to
/// leave out.
#[derive(Debug, Default)]
pub(crate) struct Selection {
    /// Subtrees that make up the main content.
    pub(crate) roots: Vec<NodeId>,
    /// Nodes under `roots` that are boilerplate.
    pub(crate) dropped: HashSet<NodeId>,
    /// Characters of text the selection keeps (roughly: before the headline is added).
    pub(crate) chars: usize,
}

/// Per-element facts, gathered bottom-up.
#[derive(Clone, Copy, Debug, Default)]
struct Facts {
    /// Characters of text (whitespace runs counted as one).
    chars: usize,
    /// Of which in the element's own text nodes (not in child elements).
    own_chars: usize,
    own_commas: usize,
    /// Of which inside links.
    link_chars: usize,
    commas: usize,
    paragraphs: usize,
    images: usize,
    list_items: usize,
    inputs: usize,
    embeds: usize,
    headings: usize,
    /// `pre` and `code` elements: code is content however short.
    code: usize,
    /// Whether a block-level element is among the descendants.
    has_block: bool,
    /// Readability's content score, when the element is a candidate.
    score: f64,
    candidate: bool,
}

impl Facts {
    fn link_density(&self) -> f64 {
        if self.chars == 0 {
            0.0
        } else {
            self.link_chars as f64 / self.chars as f64
        }
    }

    fn add(&mut self, child: &Facts) {
        self.chars += child.chars;
        self.link_chars += child.link_chars;
        self.commas += child.commas;
        self.paragraphs += child.paragraphs;
        self.images += child.images;
        self.list_items += child.list_items;
        self.inputs += child.inputs;
        self.embeds += child.embeds;
        self.headings += child.headings;
        self.code += child.code;
    }
}

const BLOCKS: &[&str] = &[
    "address",
    "article",
    "aside",
    "blockquote",
    "dd",
    "div",
    "dl",
    "dt",
    "fieldset",
    "figure",
    "footer",
    "form",
    "h1",
    "h2",
    "h3",
    "h4",
    "h5",
    "h6",
    "header",
    "hr",
    "li",
    "main",
    "nav",
    "ol",
    "p",
    "pre",
    "section",
    "table",
    "ul",
];

/// The class and id an element is judged by. An id that is a slug of four or more words
/// (`sharing-with-a-single-developer`, made from a heading) names its section's topic, not
/// its role, and is left out.
fn class_and_id(el: &scraper::node::Element) -> String {
    let mut s = String::new();
    if let Some(c) = el.attr("class") {
        s.push_str(c);
    }
    if let Some(i) = el.attr("id").filter(|i| !is_slug(i)) {
        s.push(' ');
        s.push_str(i);
    }
    s
}

fn is_slug(id: &str) -> bool {
    id.split(['-', '_']).filter(|w| !w.is_empty()).count() >= 4
}

/// Readability's class weight: +25 for a positive class/id, −25 for a negative one.
fn class_weight(el: &scraper::node::Element) -> f64 {
    let mut weight = 0.0;
    let id = el.attr("id").filter(|i| !is_slug(i));
    for value in [el.attr("class"), id].into_iter().flatten() {
        if value.is_empty() {
            continue;
        }
        let value = value.to_ascii_lowercase();
        if has_any(&value, NEGATIVE) || value.split_ascii_whitespace().any(|w| w == "hid") {
            weight -= 25.0;
        }
        if has_any(&value, POSITIVE) {
            weight += 25.0;
        }
    }
    weight
}

fn is_hidden(el: &scraper::node::Element) -> bool {
    if el.attr("hidden").is_some() || el.attr("aria-hidden") == Some("true") {
        return true;
    }
    el.attr("style").is_some_and(|style| {
        let s: String = style
            .chars()
            .filter(|c| !c.is_whitespace())
            .collect::<String>()
            .to_ascii_lowercase();
        s.contains("display:none") || s.contains("visibility:hidden")
    })
}

/// Whether an element is set aside before scoring, with everything under it.
fn is_boilerplate(el: &scraper::node::Element, inside_article: bool, by_class: bool) -> bool {
    let name = el.name();
    if NEVER_TEXT.contains(&name) || is_hidden(el) {
        return true;
    }
    if name == "body" || name == "html" || name == "main" || name == "article" {
        return false;
    }
    if CHROME.contains(&name) {
        return true;
    }
    if name == "header" && !inside_article {
        return true;
    }
    if let Some(role) = el.attr("role")
        && CHROME_ROLES.contains(&role.trim().to_ascii_lowercase().as_str())
    {
        return true;
    }
    if name == "a" || name == "table" || name == "tbody" || name == "tr" || name == "td" {
        return false;
    }
    if !by_class {
        return false;
    }
    let marks = class_and_id(el).to_ascii_lowercase();
    if marks.is_empty() {
        return false;
    }
    if has_any(&marks, COMMENTS) && !has_any(&marks, PRIMARY) {
        return true;
    }
    has_any(&marks, UNLIKELY) && !has_any(&marks, MAYBE)
}

/// Characters and commas of a text node, whitespace runs counted once.
fn text_facts(text: &str) -> (usize, usize) {
    let mut chars = 0;
    let mut commas = 0;
    let mut in_space = true;
    for c in text.chars() {
        if c.is_whitespace() {
            if !in_space {
                chars += 1;
                in_space = true;
            }
        } else {
            in_space = false;
            chars += 1;
            if c == ',' || c == '，' || c == '、' || c == '،' {
                commas += 1;
            }
        }
    }
    (chars, commas)
}

/// The initial score of a candidate by its tag.
fn tag_score(name: &str) -> f64 {
    match name {
        "div" | "article" | "main" | "section" => 5.0,
        "pre" | "td" | "blockquote" => 3.0,
        "address" | "ol" | "ul" | "dl" | "dd" | "dt" | "li" | "form" => -3.0,
        "h1" | "h2" | "h3" | "h4" | "h5" | "h6" | "th" => -5.0,
        _ => 0.0,
    }
}

fn element<'a>(node: &NodeRef<'a, Node>) -> Option<&'a scraper::node::Element> {
    match node.value() {
        Node::Element(el) => Some(el),
        _ => None,
    }
}

/// Choose the main content of `doc`, or `None` when the page has no prose to speak of.
pub(crate) fn select(doc: &Html) -> Option<Selection> {
    // As Readability does: when setting boxes aside by class and id leaves too little (a
    // page wrapped in an unclosed `<div id="header">`), choose again without that step.
    let strict = select_with(doc, Pass::FULL);
    if strict.as_ref().is_some_and(|s| s.chars >= 500) {
        return strict;
    }
    let loose = select_with(doc, Pass::KEEP_UNLIKELY);
    match (strict, loose) {
        (Some(s), Some(l)) => Some(if l.chars > s.chars * 2 { l } else { s }),
        (None, None) => {
            // Both chose a box too small to be the content (a title cell or a tab whose
            // class says "content" outscoring the unmarked article beside it): choose once
            // more without weighing class and id, rather than fall back to the whole page.
            select_with(doc, Pass::NO_CLASSES)
        }
        (s, l) => s.or(l),
    }
}

/// How much one selection pass trusts class and id.
#[derive(Clone, Copy, Debug)]
struct Pass {
    /// Set aside boxes whose class or id says boilerplate.
    by_class: bool,
    /// Weigh candidates and boxes to clean by their class and id.
    weigh: bool,
}

impl Pass {
    const FULL: Pass = Pass {
        by_class: true,
        weigh: true,
    };
    const KEEP_UNLIKELY: Pass = Pass {
        by_class: false,
        weigh: true,
    };
    const NO_CLASSES: Pass = Pass {
        by_class: false,
        weigh: false,
    };

    fn class_weight(self, el: &scraper::node::Element) -> f64 {
        if self.weigh { class_weight(el) } else { 0.0 }
    }
}

/// Credit a paragraph's `content` score to `chain`, its nearest ancestors first (Readability:
/// full to the parent, half to the grandparent, then a third of the level).
fn credit<'c>(
    doc: &Html,
    pass: Pass,
    chain: impl Iterator<Item = &'c mut (NodeId, Facts)>,
    content: f64,
) {
    for (level, (aid, ancestor)) in chain.take(5).enumerate() {
        if !ancestor.candidate {
            ancestor.candidate = true;
            if let Some(ael) = doc.tree.get(*aid).as_ref().and_then(element) {
                ancestor.score += tag_score(ael.name()) + pass.class_weight(ael);
            }
        }
        let divider = match level {
            0 => 1.0,
            1 => 2.0,
            l => l as f64 * 3.0,
        };
        ancestor.score += content / divider;
    }
}

fn paragraph_score(chars: usize, commas: usize) -> f64 {
    1.0 + commas as f64 + (chars as f64 / 100.0).floor().min(3.0)
}

fn select_with(doc: &Html, pass: Pass) -> Option<Selection> {
    let mut facts: HashMap<NodeId, Facts> = HashMap::new();
    let mut dropped: HashSet<NodeId> = HashSet::new();
    let mut first_h1: Option<NodeId> = None;
    // The open elements from the root to the current node, with the facts gathered so far.
    let mut stack: Vec<(NodeId, Facts)> = Vec::new();
    let mut skipping: Option<NodeId> = None;
    let mut articles = 0usize;

    for edge in doc.tree.root().traverse() {
        match edge {
            Edge::Open(node) => {
                if skipping.is_some() {
                    continue;
                }
                match node.value() {
                    Node::Element(el) => {
                        if is_boilerplate(el, articles > 0, pass.by_class) {
                            dropped.insert(node.id());
                            skipping = Some(node.id());
                            continue;
                        }
                        if el.name() == "article" {
                            articles += 1;
                        }
                        if el.name() == "h1" && first_h1.is_none() {
                            first_h1 = Some(node.id());
                        }
                        stack.push((node.id(), Facts::default()));
                    }
                    Node::Text(text) => {
                        if let Some((_, top)) = stack.last_mut() {
                            let (chars, commas) = text_facts(text);
                            top.chars += chars;
                            top.commas += commas;
                            top.own_chars += chars;
                            top.own_commas += commas;
                        }
                    }
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
                let Some(el) = element(&node) else { continue };
                let Some((id, mut f)) = stack.pop() else {
                    continue;
                };
                debug_assert_eq!(id, node.id());
                let name = el.name();
                match name {
                    "a" => f.link_chars = f.chars,
                    "p" => f.paragraphs += 1,
                    "img" | "picture" => f.images += 1,
                    "li" => f.list_items += 1,
                    "input" | "select" | "textarea" => f.inputs += 1,
                    "embed" | "object" | "iframe" | "video" | "audio" => f.embeds += 1,
                    "h1" | "h2" | "h3" | "h4" | "h5" | "h6" => f.headings += 1,
                    "pre" | "code" => f.code += 1,
                    "article" => articles -= 1,
                    _ => {}
                }
                // A paragraph-like block scores its ancestors.
                let scores = matches!(name, "p" | "pre" | "td" | "blockquote" | "section")
                    || (matches!(name, "div" | "li" | "dd") && !f.has_block);
                if scores && f.chars >= 25 {
                    credit(
                        doc,
                        pass,
                        stack.iter_mut().rev(),
                        paragraph_score(f.chars, f.commas),
                    );
                } else if f.has_block && f.own_chars >= 25 {
                    // Loose text beside blocks (`text<br>text<div>…`): a paragraph of this
                    // element's, as Readability wraps it in one.
                    let mut me = (id, f);
                    credit(
                        doc,
                        pass,
                        std::iter::once(&mut me).chain(stack.iter_mut().rev()),
                        paragraph_score(f.own_chars, f.own_commas),
                    );
                    f = me.1;
                }
                if let Some((_, parent)) = stack.last_mut() {
                    parent.add(&f);
                    parent.has_block |= f.has_block || BLOCKS.contains(&name);
                }
                facts.insert(id, f);
            }
        }
    }

    // The best candidate, its score scaled by the share of text outside links.
    let final_score = |f: &Facts| f.score * (1.0 - f.link_density());
    let mut ranked: Vec<(NodeId, f64)> = facts
        .iter()
        .filter(|(_, f)| f.candidate)
        .map(|(id, f)| (*id, final_score(f)))
        .collect();
    // Best first; a tie goes to the box first in the document (node ids follow the parse), so
    // the choice never depends on the map's order.
    ranked.sort_by(|a, b| b.1.total_cmp(&a.1).then(a.0.cmp(&b.0)));
    let (mut top, top_score) = *ranked.first()?;
    let is_body = |id: NodeId| {
        doc.tree
            .get(id)
            .as_ref()
            .and_then(element)
            .is_none_or(|el| matches!(el.name(), "body" | "html"))
    };

    // Content split across siblings: the closest ancestor holding 3 of the best 5.
    let alternatives: Vec<NodeId> = ranked
        .iter()
        .skip(1)
        .take(4)
        .filter(|(_, s)| *s >= top_score * 0.75)
        .map(|(id, _)| *id)
        .collect();
    if alternatives.len() >= 2 {
        let ancestors_of = |id: NodeId| -> Vec<NodeId> {
            let mut out = Vec::new();
            let mut cur = doc.tree.get(id).and_then(|n| n.parent());
            while let Some(n) = cur {
                out.push(n.id());
                cur = n.parent();
            }
            out
        };
        let alt_ancestors: Vec<HashSet<NodeId>> = alternatives
            .iter()
            .map(|id| ancestors_of(*id).into_iter().collect())
            .collect();
        for ancestor in ancestors_of(top) {
            if is_body(ancestor) {
                break;
            }
            let holding = alt_ancestors
                .iter()
                .filter(|a| a.contains(&ancestor))
                .count();
            if holding >= 2 {
                top = ancestor;
                break;
            }
        }
    }

    // Walk up while a parent scores higher (the content continues there).
    let score_of = |id: NodeId| facts.get(&id).filter(|f| f.candidate).map(final_score);
    let mut last = score_of(top).unwrap_or(top_score);
    let threshold = last / 3.0;
    let mut cur = doc.tree.get(top).and_then(|n| n.parent());
    while let Some(parent) = cur {
        if is_body(parent.id()) {
            break;
        }
        match score_of(parent.id()) {
            None => {}
            Some(s) if s < threshold => break,
            Some(s) if s > last => {
                top = parent.id();
                break;
            }
            Some(s) => last = s,
        }
        cur = parent.parent();
    }
    // An only child stands for its parent.
    while let Some(parent) = doc.tree.get(top).and_then(|n| n.parent()) {
        if is_body(parent.id()) || parent.children().filter(|c| c.value().is_element()).count() != 1
        {
            break;
        }
        top = parent.id();
    }

    let top_facts = facts.get(&top).copied().unwrap_or_default();
    if top_facts.chars < 140 {
        return None;
    }
    let top_score = score_of(top).unwrap_or(top_score);

    // Siblings that belong with it.
    let top_node = doc.tree.get(top)?;
    let top_class = element(&top_node)
        .and_then(|el| el.attr("class"))
        .unwrap_or("");
    let mut roots = Vec::new();
    let siblings: Vec<NodeRef<'_, Node>> = match top_node.parent() {
        Some(parent) if !is_body(top) => parent.children().collect(),
        _ => vec![top_node],
    };
    let floor = (top_score * 0.2).max(10.0);
    for sibling in siblings {
        let id = sibling.id();
        if id == top {
            roots.push(id);
            continue;
        }
        let Some(el) = element(&sibling) else {
            continue;
        };
        if dropped.contains(&id) {
            continue;
        }
        let Some(f) = facts.get(&id) else { continue };
        let bonus = if !top_class.is_empty() && el.attr("class") == Some(top_class) {
            top_score * 0.2
        } else {
            0.0
        };
        let joins = (f.candidate && final_score(f) + bonus >= floor)
            || (el.name() == "p" && {
                let density = f.link_density();
                (f.chars > 80 && density < 0.25)
                    || (f.chars > 0 && f.chars <= 80 && density == 0.0 && ends_sentence(&sibling))
            });
        if joins {
            roots.push(id);
        }
    }

    // Clean inside the chosen roots; a cleaning that would leave little of the content (a page
    // of teasers, a list of stories) is not applied, as Readability retries without it.
    let before: usize = roots
        .iter()
        .filter_map(|r| facts.get(r))
        .map(|f| f.chars)
        .sum();
    // Failing that, a light cleaning that takes only what is nearly all links (menus, lists of
    // names), which a page of teasers keeps.
    let mut chars = before;
    for light in [false, true] {
        let mut cleaned = HashSet::new();
        let mut removed = 0;
        for root in &roots {
            let Some(node) = doc.tree.get(*root) else {
                continue;
            };
            removed += clean(node, pass, &facts, &dropped, &mut cleaned, light);
        }
        let kept = before.saturating_sub(removed);
        if kept >= 500 || kept * 4 >= before {
            dropped.extend(cleaned);
            chars = kept;
            break;
        }
    }

    // The page's headline leads when the content does not hold it.
    if let Some(h1) = first_h1
        && !dropped.contains(&h1)
        && !roots.iter().any(|r| is_ancestor_or_self(doc, *r, h1))
        && facts
            .get(&h1)
            .is_some_and(|f| f.chars > 0 && f.link_density() < 0.5)
        && precedes(doc, h1, roots[0])
    {
        roots.insert(0, h1);
    }
    Some(Selection {
        roots,
        dropped,
        chars,
    })
}

fn ends_sentence(node: &NodeRef<'_, Node>) -> bool {
    let mut last = String::new();
    for d in node.descendants() {
        if let Node::Text(t) = d.value() {
            let t = t.trim_end();
            if !t.is_empty() {
                last = t.to_string();
            }
        }
    }
    last.ends_with(['.', '!', '?', '。', '」', '"', '”'])
}

fn is_ancestor_or_self(doc: &Html, ancestor: NodeId, node: NodeId) -> bool {
    let mut cur = doc.tree.get(node);
    while let Some(n) = cur {
        if n.id() == ancestor {
            return true;
        }
        cur = n.parent();
    }
    false
}

/// Whether `a` comes before `b` in document order.
fn precedes(doc: &Html, a: NodeId, b: NodeId) -> bool {
    for edge in doc.tree.root().traverse() {
        if let Edge::Open(n) = edge {
            if n.id() == a {
                return true;
            }
            if n.id() == b {
                return false;
            }
        }
    }
    false
}

/// Readability's conditional cleaning, top-down so a dropped box takes its subtree: the boxes
/// to drop go to `cleaned`; returns the characters they hold.
fn clean(
    root: NodeRef<'_, Node>,
    pass: Pass,
    facts: &HashMap<NodeId, Facts>,
    dropped: &HashSet<NodeId>,
    cleaned: &mut HashSet<NodeId>,
    light: bool,
) -> usize {
    let mut removed = 0;
    let mut skipping: Option<NodeId> = None;
    for edge in root.traverse() {
        match edge {
            Edge::Open(node) => {
                if skipping.is_some() || node.id() == root.id() {
                    continue;
                }
                let Some(el) = element(&node) else { continue };
                if dropped.contains(&node.id()) {
                    skipping = Some(node.id());
                    continue;
                }
                let Some(f) = facts.get(&node.id()) else {
                    continue;
                };
                if drops_conditionally(el, pass, f, light) {
                    cleaned.insert(node.id());
                    removed += f.chars;
                    skipping = Some(node.id());
                }
            }
            Edge::Close(node) => {
                if skipping == Some(node.id()) {
                    skipping = None;
                }
            }
        }
    }
    removed
}

/// Readability's conditional cleaning of one box; `light`: only what is nearly all links.
fn drops_conditionally(el: &scraper::node::Element, pass: Pass, f: &Facts, light: bool) -> bool {
    let name = el.name();
    if light {
        return matches!(
            name,
            "div" | "section" | "ul" | "ol" | "dl" | "table" | "header" | "form"
        ) && f.chars > 0
            && f.link_density() > 0.75
            && f.code == 0;
    }
    // Headings and short boxes whose class says chrome.
    if matches!(name, "h1" | "h2" | "h3" | "h4" | "h5" | "h6") {
        return pass.class_weight(el) < 0.0 || f.link_density() > 0.5;
    }
    if !matches!(
        name,
        "div"
            | "section"
            | "ul"
            | "ol"
            | "table"
            | "form"
            | "fieldset"
            | "dl"
            | "header"
            | "figure"
    ) {
        return false;
    }
    if f.chars == 0 {
        // Images and figures carry no text but are content; empty boxes are nothing.
        return f.images == 0;
    }
    let weight = pass.class_weight(el);
    let score = if f.candidate { f.score } else { 0.0 };
    if weight + score < 0.0 {
        return true;
    }
    if f.commas >= 10 || (f.code > 0 && f.link_density() < 0.5) {
        return false;
    }
    let is_list = matches!(name, "ul" | "ol" | "dl")
        || (f.list_items > 0 && f.paragraphs == 0 && name != "table");
    let density = f.link_density();
    let p = f.paragraphs as f64;
    let li = f.list_items as f64 - 100.0;
    let images = f.images as f64;
    let figure = name == "figure";
    if is_list {
        return density > 0.5 || (weight < 0.0 && density > 0.2);
    }
    if name == "table" {
        return density > 0.5;
    }
    (images > 1.0 && p / images < 0.5 && !figure)
        || li > p
        || f.inputs as f64 > (p / 3.0).floor()
        || (f.chars < 25 && f.headings == 0 && (f.images == 0 || f.images > 2) && !figure)
        || (weight < 25.0 && density > 0.2 + if f.chars > 500 { 0.1 } else { 0.0 })
        || (weight >= 25.0 && density > 0.5)
        || (f.embeds == 1 && f.chars < 75)
        || f.embeds > 1
}
