//! Tables as markdown, every cell kept: the converter's table handler, in place of `htmd`'s.
//!
//! - A table with header cells (`<th>` or `<thead>`, its own, not a nested table's) that is not
//!   itself inside a cell is a data table and becomes a pipe table. Any other table lays a page
//!   out: its cells' content is written in order as ordinary blocks, as before.
//! - Every cell of a row is kept, `<th>` and `<td>` alike, in document order: a row that starts
//!   with its own header cell (`<tr><th>Capital</th><td>Wellington</td></tr>`, the rows of an
//!   infobox, of a spec sheet, of an API's parameter table) keeps its label. A cell spanning
//!   `colspan` columns is followed by empty cells so the columns after it stay aligned.
//! - The header is `<thead>`'s first row, else the first row (markdown has no table without
//!   one).
//! - Rows with no text and columns empty in every row are left out; cells are not padded to
//!   the column's width. Both only cost the agent tokens.
//! - A cell's line breaks become spaces and its `|` is escaped (`\|`), so the table's shape
//!   survives.
//!
//! The handler walks the table's own rows and cells (bounded by the fragment's capped depth,
//! [`super::bounded::MAX_DEPTH`]); each cell's content is converted by the other handlers.

use std::rc::Rc;

use htmd::Node;
use htmd::element_handler::{HandlerResult, Handlers};
use markup5ever_rcdom::NodeData;

/// A cell may not claim more columns than this (a `colspan="1000"` adds no information).
const MAX_COLSPAN: usize = 32;
/// Nor pad a row past this many columns (a real cell is never left out).
const MAX_PADDED_COLUMNS: usize = 64;

/// The `htmd` handler for `<table>`.
pub(crate) fn handler(
    handlers: &dyn Handlers,
    element: htmd::Element<'_>,
) -> Option<HandlerResult> {
    if inside_cell(element.node) || !has_header_cells(element.node) {
        // A layout table: its content as blocks.
        return Some(blocks(handlers.walk_children(element.node).content));
    }
    let mut caption = String::new();
    let mut head: Option<Vec<String>> = None;
    let mut rows: Vec<Vec<String>> = Vec::new();
    for child in children(element.node) {
        match tag(&child) {
            Some("caption") => {
                caption = one_line(&handlers.walk_children(&child).content);
            }
            Some(section @ ("thead" | "tbody" | "tfoot")) => {
                for tr in children(&child).filter(|n| tag(n) == Some("tr")) {
                    let row = row(handlers, &tr);
                    if section == "thead" && head.is_none() {
                        head = Some(row);
                    } else {
                        rows.push(row);
                    }
                }
            }
            Some("tr") => rows.push(row(handlers, &child)),
            _ => {}
        }
    }
    // Rows with no text (spacers) say nothing, as header or as body.
    rows.retain(|cells| cells.iter().any(|c| !c.is_empty()));
    let mut head = match head {
        Some(head) => head,
        None if !rows.is_empty() => rows.remove(0),
        None => return Some(blocks(caption)),
    };
    let mut body = rows;
    let columns = body
        .iter()
        .map(Vec::len)
        .chain([head.len()])
        .max()
        .unwrap_or(0);
    // Columns with no text in any row (spacers).
    let kept: Vec<usize> = (0..columns)
        .filter(|&i| {
            head.get(i).is_some_and(|c| !c.is_empty())
                || body.iter().any(|r| r.get(i).is_some_and(|c| !c.is_empty()))
        })
        .collect();
    if kept.is_empty() {
        return Some(blocks(caption));
    }
    let mut out = String::from("\n\n");
    if !caption.is_empty() {
        out.push_str(&caption);
        out.push_str("\n\n");
    }
    write_row(&mut out, &mut head, &kept);
    out.push('|');
    for _ in &kept {
        out.push_str(" --- |");
    }
    out.push('\n');
    for row in &mut body {
        write_row(&mut out, row, &kept);
    }
    out.push('\n');
    Some(out.into())
}

/// One `<tr>`: its cells' markdown, `<th>` and `<td>` alike, in order.
fn row(handlers: &dyn Handlers, tr: &Rc<Node>) -> Vec<String> {
    let mut cells = Vec::new();
    for cell in children(tr) {
        if !matches!(tag(&cell), Some("td" | "th")) {
            continue;
        }
        let text = handlers
            .handle(&cell)
            .map(|r| one_line(&r.content))
            .unwrap_or_default();
        cells.push(text);
        for _ in 1..colspan(&cell) {
            if cells.len() >= MAX_PADDED_COLUMNS {
                break;
            }
            cells.push(String::new());
        }
    }
    cells
}

fn write_row(out: &mut String, cells: &mut [String], kept: &[usize]) {
    out.push('|');
    for &i in kept {
        let cell = cells.get_mut(i).map(std::mem::take).unwrap_or_default();
        if cell.is_empty() {
            out.push_str("  |");
        } else {
            out.push(' ');
            out.push_str(&cell);
            out.push_str(" |");
        }
    }
    out.push('\n');
}

/// A cell's markdown on one line: whitespace runs (line breaks included) become one space,
/// `|` is escaped.
fn one_line(markdown: &str) -> String {
    // The same collapse as the parent module's `collapse_ws` (not called: a child module may not
    // import its parent, `module_layers`).
    markdown
        .split_whitespace()
        .collect::<Vec<_>>()
        .join(" ")
        .replace('|', "\\|")
}

/// Content written as blocks of its own.
fn blocks(content: String) -> HandlerResult {
    let trimmed = content.trim_matches('\n');
    if trimmed.is_empty() {
        return String::new().into();
    }
    format!("\n\n{trimmed}\n\n").into()
}

fn colspan(cell: &Rc<Node>) -> usize {
    let NodeData::Element { attrs, .. } = &cell.data else {
        return 1;
    };
    attrs
        .borrow()
        .iter()
        .find(|a| a.name.local.as_ref() == "colspan")
        .and_then(|a| a.value.trim().parse::<usize>().ok())
        .unwrap_or(1)
        .clamp(1, MAX_COLSPAN)
}

fn children(node: &Rc<Node>) -> impl Iterator<Item = Rc<Node>> {
    let children: Vec<Rc<Node>> = node.children.borrow().clone();
    children.into_iter()
}

fn tag(node: &Node) -> Option<&str> {
    match &node.data {
        NodeData::Element { name, .. } => Some(name.local.as_ref()),
        _ => None,
    }
}

/// Whether any ancestor is a table cell (a table nested in a cell lays that cell out).
fn inside_cell(node: &Rc<Node>) -> bool {
    let mut current = parent(node);
    while let Some(p) = current {
        if matches!(tag(&p), Some("td" | "th")) {
            return true;
        }
        current = parent(&p);
    }
    false
}

fn parent(node: &Node) -> Option<Rc<Node>> {
    let weak = node.parent.take();
    let parent = weak.as_ref().and_then(std::rc::Weak::upgrade);
    node.parent.set(weak);
    parent
}

/// Whether the table has header cells of its own: a `<thead>`, or a `<th>` in one of its rows
/// (a nested table's are not its own).
fn has_header_cells(table: &Rc<Node>) -> bool {
    children(table).any(|section| match tag(&section) {
        Some("thead") => true,
        Some("tbody" | "tfoot") => children(&section)
            .filter(|tr| tag(tr) == Some("tr"))
            .any(|tr| has_th(&tr)),
        Some("tr") => has_th(&section),
        _ => false,
    })
}

fn has_th(tr: &Rc<Node>) -> bool {
    tr.children.borrow().iter().any(|c| tag(c) == Some("th"))
}
