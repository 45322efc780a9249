//! Test pages: what real pages look like to the extractor, built in code.

/// A news page as they come: navigation, a header, a share bar, the article, related links,
/// a sidebar, comments and a footer.
pub fn news_page() -> String {
    let nav: String = (0..25)
        .map(|i| format!("<li><a href=\"/section/{i}\">NAVLINK section {i}</a></li>"))
        .collect();
    let related: String = (0..8)
        .map(|i| {
            format!("<li><a href=\"/story/{i}\">RELATED headline number {i} you may like</a></li>")
        })
        .collect();
    let paragraphs: String = [
        "The city council voted on Tuesday to expand the tram network by twelve kilometres, a plan that has been debated for almost a decade.",
        "Supporters say the new line will cut commuting times for about forty thousand residents, while critics point to the cost, estimated at 380 million euros.",
        "Construction is expected to begin next spring, and the first trams could run on the extended line by the end of 2029, according to the transport department.",
        "Residents of the eastern districts, who currently rely on buses, welcomed the decision, although several shop owners worry about years of roadworks.",
    ]
    .iter()
    .map(|p| format!("<p>ARTICLE {p}</p>"))
    .collect();
    format!(
        "<!DOCTYPE html><html><head><title>Tram network to grow | Daily Example</title></head><body>\
         <header class=\"site-header\"><a href=\"/\">Daily Example</a><nav><ul>{nav}</ul></nav></header>\
         <div class=\"share-bar\"><a href=\"/share/fb\">SHARE on Facebook</a> <a href=\"/share/x\">SHARE on X</a></div>\
         <div id=\"content\"><article><h1>Tram network to grow by twelve kilometres</h1>\
         <p class=\"byline\">By A. Reporter</p>{paragraphs}</article>\
         <div class=\"related-stories\"><h3>Related</h3><ul>{related}</ul></div></div>\
         <aside class=\"sidebar\"><h3>Most read</h3><ul><li><a href=\"/x\">SIDEBAR popular story</a></li></ul></aside>\
         <div id=\"comments\"><h3>Comments</h3><p>COMMENT nice article, thanks for writing it up in such detail.</p></div>\
         <footer><p>FOOTER © Daily Example. All rights reserved.</p><a href=\"/privacy\">FOOTER privacy</a></footer>\
         </body></html>"
    )
}

/// A marker of each kind of boilerplate on [`news_page`].
pub const BOILERPLATE: &[&str] = &[
    "NAVLINK",
    "SHARE on",
    "RELATED headline",
    "SIDEBAR",
    "COMMENT",
    "FOOTER",
];
