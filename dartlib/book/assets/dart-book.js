// copied into every book by dartlib.book.site
// Opened as a file (file://), the browser refuses the requests that fetch each result's excerpt:
// search then lists the matching pages without excerpts, and says how to serve the book.
if (window.location.protocol === "file:" && typeof DOCUMENTATION_OPTIONS !== "undefined") {
  DOCUMENTATION_OPTIONS.SHOW_SEARCH_SUMMARY = false;
  document.addEventListener("DOMContentLoaded", () => {
    const results = document.getElementById("search-results");
    if (!results) return;
    const note = document.createElement("p");
    note.className = "search-file-note";
    note.textContent = "Opened as a file: results are listed without excerpts. Serve the book for excerpts: "
      + "python -m http.server --directory build/book/<profile>/html 8000, then open http://localhost:8000/";
    results.parentNode.insertBefore(note, results);
  });
}
// Served, each result's excerpt is the passage around the search words in the page's article:
// Sphinx reads the theme's whole main block, whose header (the colour-mode menu, "System Settings
// Light Dark") and foot are no part of any passage.
const dartArticleText = (htmlString, anchor) => {
  const page = new DOMParser().parseFromString(htmlString, "text/html");
  const chrome = [".headerlink", "script", "style", "button", ".bd-header-article", ".header-article-items",
                  ".theme-switch-container", ".prev-next-area", ".bd-footer-article", ".bd-sidebar-secondary"];
  page.querySelectorAll(chrome.join(", ")).forEach((el) => el.remove());
  const article = page.querySelector("article.bd-article") || page.querySelector('[role="main"]');
  if (!article) return "";
  const block = anchor ? article.querySelector(anchor) : null;
  return (block || article).textContent.replace(/\s+/g, " ");
};
const dartPatchSearch = () => {
  if (typeof Search !== "undefined" && Search.htmlToText !== dartArticleText) Search.htmlToText = dartArticleText;
};
dartPatchSearch();
document.addEventListener("DOMContentLoaded", dartPatchSearch);
