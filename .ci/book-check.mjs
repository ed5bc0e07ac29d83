// The book, checked in a browser: renders every chapter of the built book
// (book/book) in headless Chromium and fails a chapter when
//   - it does not render (no page, an HTTP error, a script error, no heading,
//     or a `{{#...}}` directive left in the text);
//   - a chart its source includes (an .svg file) is missing from the page, is
//     wider than the page at 1280 px or at 420 px, has no opaque card of its
//     own, or has text that does not read on that card (a contrast under
//     4.5:1) in any of mdBook's themes, light or dark;
//   - the page itself scrolls sideways at 1280 px or at 420 px (a table may
//     scroll inside its own box; the page may not);
//   - a flag is printed with an en dash ("–reap": smart punctuation);
//   - at 420 px, a table's "verdict" column is out of view (the reader would
//     have to scroll the table sideways to see a verdict).
// One line per chapter, then `N passed, M failed`. A full-page screenshot of
// each chapter at 1280 px goes to target/book-check/<chapter>.png, and each
// chapter's length in screens (page height / 800 px) is printed.
//
//   node .ci/book-check.mjs [--book DIR] [--site DIR] [--out DIR] [--theme NAME]
//                           [--only CHAPTER[,CHAPTER...]] [--self-test]
//
// --site DIR checks another build of the book's pages: a reader's edition
// from `lab book --out DIR`.
//
// --self-test breaks copies of the built pages on purpose (an over-wide
// element, an en-dash flag, a missing chart, an over-wide chart, a chart
// without a card, a chart whose card stays white in a dark theme, a
// leftover directive, a missing page) and passes only
// if the check catches each one.
// Needs Chromium (CHROMIUM, default /usr/bin/chromium) and playwright-core
// (npm ci --prefix .ci). Without Chromium it skips, except under CI=true,
// where it fails.

import { chromium } from "playwright-core";
import fs from "node:fs";
import http from "node:http";
import os from "node:os";
import path from "node:path";

const WIDE = { width: 1280, height: 800 };
const NARROW = { width: 420, height: 800 };
const LAUNCH_ARGS = [
  "--no-sandbox",
  "--disable-gpu",
  "--disable-quic",
  "--no-first-run",
  "--disable-background-networking",
  "--disable-component-update",
  "--disable-sync",
];

function parseArgs(argv) {
  const opts = {
    root: process.cwd(),
    book: "book",
    out: "target/book-check",
    theme: null,
    only: null,
    site: null,
    selfTest: false,
  };
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i];
    const value = () => {
      if (i + 1 >= argv.length) usage(`${a} needs a value`);
      return argv[++i];
    };
    if (a === "--book") opts.book = value();
    else if (a === "--out") opts.out = value();
    else if (a === "--theme") opts.theme = value();
    else if (a === "--only") opts.only = value();
    else if (a === "--site") opts.site = value();
    else if (a === "--self-test") opts.selfTest = true;
    else usage(`unknown argument ${a}`);
  }
  return opts;
}

function usage(message) {
  console.error(`book-check: ${message}`);
  console.error(
    "usage: node .ci/book-check.mjs [--book DIR] [--site DIR] [--out DIR] " +
      "[--theme NAME] [--only CHAPTER[,CHAPTER...]] [--self-test]",
  );
  process.exit(2);
}

/// The chapters of SUMMARY.md, in order: { name, md, html }.
function chapters(bookDir) {
  const src = path.join(bookDir, srcDir(bookDir));
  const summary = fs.readFileSync(path.join(src, "SUMMARY.md"), "utf8");
  const out = [];
  for (const m of summary.matchAll(/\]\(([^)\s]+\.md)(#[^)]*)?\)/g)) {
    const md = m[1].replace(/^\.\//, "");
    if (out.some((c) => c.md === md)) continue;
    const html = md.replace(/(^|\/)README\.md$/, "$1index.md").replace(/\.md$/, ".html");
    out.push({ name: md.replace(/\.md$/, ""), md, html, src: path.join(src, md) });
  }
  return out;
}

function srcDir(bookDir) {
  const toml = fs.readFileSync(path.join(bookDir, "book.toml"), "utf8");
  const m = toml.match(/^\s*src\s*=\s*"([^"]+)"/m);
  return m ? m[1] : "src";
}

function buildDir(bookDir) {
  const toml = fs.readFileSync(path.join(bookDir, "book.toml"), "utf8");
  const m = toml.match(/^\s*build-dir\s*=\s*"([^"]+)"/m);
  return path.join(bookDir, m ? m[1] : "book");
}

/// The reference run the book shows, as the book's preprocessor (mdbook-lab)
/// picks it: the last folder of results/ whose name starts with a digit.
function referenceRun(root) {
  const results = path.join(root, "results");
  if (!fs.existsSync(results)) return null;
  const runs = fs
    .readdirSync(results, { withFileTypes: true })
    .filter((e) => e.isDirectory() && /^[0-9]/.test(e.name))
    .map((e) => e.name)
    .sort();
  return runs.length ? path.join(results, runs[runs.length - 1]) : null;
}

/// The charts a chapter's source includes (`{{#result EXP/x.svg}}`, an
/// `{{#include}}` of an .svg): every `.svg` path it names that exists, with
/// the chart's title to find it on the page.
function expectedCharts(chapter, root) {
  const text = fs.readFileSync(chapter.src, "utf8");
  const reference = referenceRun(root);
  const charts = [];
  for (const m of text.matchAll(/[\w./-]+\.svg\b/g)) {
    const candidates = [
      reference && path.resolve(reference, m[0]),
      path.resolve(path.dirname(chapter.src), m[0]),
      path.resolve(root, m[0]),
      path.resolve(root, "results", m[0]),
    ].filter(Boolean);
    const file = candidates.find((f) => fs.existsSync(f));
    if (!file) {
      if (!charts.some((c) => c.file === m[0])) charts.push({ file: m[0], title: null });
      continue;
    }
    const svg = fs.readFileSync(file, "utf8");
    const title = svgTitle(svg);
    if (title && !charts.some((c) => c.file === file)) {
      charts.push({ file: path.relative(root, file), title });
    }
  }
  return charts;
}

function svgTitle(svg) {
  const t = svg.match(/<title>([^<]+)<\/title>/) || svg.match(/<text[^>]*>([^<]+)</);
  return t ? decode(t[1]).replace(/\s+/g, " ").trim() : null;
}

function decode(s) {
  return s
    .replace(/&lt;/g, "<")
    .replace(/&gt;/g, ">")
    .replace(/&quot;/g, '"')
    .replace(/&apos;/g, "'")
    .replace(/&#39;/g, "'")
    .replace(/&amp;/g, "&");
}

/// A static file server for the built book on 127.0.0.1.
function serve(dir) {
  const types = {
    ".html": "text/html; charset=utf-8",
    ".css": "text/css",
    ".js": "text/javascript",
    ".svg": "image/svg+xml",
    ".png": "image/png",
    ".woff2": "font/woff2",
    ".woff": "font/woff",
    ".ttf": "font/ttf",
    ".json": "application/json",
    ".ico": "image/x-icon",
  };
  const server = http.createServer((req, res) => {
    const url = decodeURIComponent(new URL(req.url, "http://x").pathname);
    let file = path.join(dir, path.normalize(url));
    if (!file.startsWith(dir)) {
      res.writeHead(403).end();
      return;
    }
    if (fs.existsSync(file) && fs.statSync(file).isDirectory()) {
      file = path.join(file, "index.html");
    }
    fs.readFile(file, (err, body) => {
      if (err) {
        res.writeHead(404).end("not found");
        return;
      }
      res.writeHead(200, {
        "content-type": types[path.extname(file)] || "application/octet-stream",
      });
      res.end(body);
    });
  });
  return new Promise((resolve) => {
    server.listen(0, "127.0.0.1", () => resolve(server));
  });
}

/// What the page looks like at the current viewport size, measured in the
/// page.
function measure() {
  const root = document.documentElement;
  const main = document.querySelector("main");
  const mainBox = main ? main.getBoundingClientRect() : null;
  // mdBook's content column scrolls on its own (overflow-x: auto): when it
  // scrolls sideways, the reader sees the page scroll sideways.
  const content = document.querySelector("#mdbook-content, .content");
  const scrollers = [root, document.body, content].filter(Boolean);
  const overflow = Math.max(...scrollers.map((e) => e.scrollWidth - e.clientWidth));
  const pageWidth = root.clientWidth;
  const visibleRight = content
    ? Math.min(pageWidth, content.getBoundingClientRect().left + content.clientWidth)
    : pageWidth;
  const isChart = (svg) =>
    !svg.parentElement.closest("svg, button, pre, code, a, nav, .buttons") &&
    svg.getBoundingClientRect().height > 40;
  const charts = main ? [...main.querySelectorAll("svg")].filter(isChart) : [];
  // Elements sticking out to the right of the page, not inside a box of the
  // chapter's own that scrolls (a table's wrapper, a code block).
  const scrollsOwn = (el) => {
    for (let e = el.parentElement; e && e !== main && e !== document.body; e = e.parentElement) {
      if (/(auto|scroll|hidden|clip)/.test(getComputedStyle(e).overflowX)) return true;
    }
    return false;
  };
  const sticking = [];
  for (const el of (main || document.body).querySelectorAll("*")) {
    const r = el.getBoundingClientRect();
    if (r.width > 0 && r.right > visibleRight + 1 && !scrollsOwn(el)) {
      const id = el.id ? `#${el.id}` : "";
      const cls = typeof el.className === "string" && el.className
        ? `.${el.className.trim().split(/\s+/).join(".")}` : "";
      sticking.push(`${el.tagName.toLowerCase()}${id}${cls} (right edge ${Math.round(r.right)} px)`);
      if (sticking.length >= 3) break;
    }
  }
  // Text outside code: where a flag printed with an en dash or an unexpanded
  // directive would show.
  const prose = [];
  if (main) {
    const walker = document.createTreeWalker(main, NodeFilter.SHOW_TEXT);
    for (let n = walker.nextNode(); n; n = walker.nextNode()) {
      if (!n.parentElement.closest("pre, code, script, style")) prose.push(n.nodeValue);
    }
  }
  const code = main
    ? [...main.querySelectorAll("code")].map((c) => c.textContent).join("\n")
    : "";
  const tables = main
    ? [...main.querySelectorAll("table")].map((t) => ({
        header: [...t.querySelectorAll("th")].map((h) => h.textContent.trim()).slice(0, 3).join(" | "),
        width: Math.round(t.getBoundingClientRect().width),
      }))
    : [];
  // The cells of every table's "verdict" column that end to the right of
  // what the reader sees without scrolling.
  const hiddenVerdicts = [];
  for (const t of main ? main.querySelectorAll("table") : []) {
    const heads = [...t.querySelectorAll("th")].map((h) => h.textContent.trim().toLowerCase());
    const col = heads.indexOf("verdict");
    if (col < 0) continue;
    for (const row of t.querySelectorAll("tr")) {
      const cell = row.children[col];
      if (cell && cell.getBoundingClientRect().right > visibleRight + 1) {
        hiddenVerdicts.push(cell.textContent.trim().slice(0, 40));
        break;
      }
    }
  }
  return {
    hiddenVerdicts,
    title: document.querySelector("main h1, main h2")?.textContent.trim() ?? null,
    overflow,
    pageWidth,
    visibleRight,
    height: Math.max(root.scrollHeight, document.body.scrollHeight),
    mainWidth: mainBox ? Math.round(mainBox.width) : 0,
    mainRight: mainBox ? mainBox.right : 0,
    charts: charts.map((svg) => {
      const r = svg.getBoundingClientRect();
      return {
        text: svg.textContent.replace(/\s+/g, " ").trim(),
        width: Math.round(r.width),
        right: r.right,
      };
    }),
    sticking,
    text: prose.join(" "),
    code,
    tables,
  };
}

/// mdBook's themes: light ones and dark ones (coal, navy, ayu).
const THEMES = ["light", "rust", "coal", "navy", "ayu"];

/// In the page, under `theme` (mdBook's class on <html>): each chart's
/// card and the worst contrast of its text against that card (WCAG's
/// ratio of relative luminances, 1 to 21). A chart must draw its own card,
/// a rectangle covering it with an opaque fill, and its text must read on
/// it, in every theme.
function chartContrast(theme) {
  const root = document.documentElement;
  root.classList.remove(...["light", "rust", "coal", "navy", "ayu"]);
  root.classList.add(theme);
  const main = document.querySelector("main");
  const parse = (c) => {
    const m = c.match(/rgba?\(([\d.]+), ([\d.]+), ([\d.]+)(?:, ([\d.]+))?/);
    return m ? { rgb: [m[1], m[2], m[3]].map(Number), alpha: m[4] === undefined ? 1 : Number(m[4]) } : null;
  };
  const luminance = ([r, g, b]) => {
    const lin = (v) => { v /= 255; return v <= 0.03928 ? v / 12.92 : ((v + 0.055) / 1.055) ** 2.4; };
    return 0.2126 * lin(r) + 0.7152 * lin(g) + 0.0722 * lin(b);
  };
  const ratio = (a, b) => (Math.max(a, b) + 0.05) / (Math.min(a, b) + 0.05);
  const isChart = (svg) =>
    !svg.parentElement.closest("svg, button, pre, code, a, nav, .buttons") &&
    svg.getBoundingClientRect().height > 40;
  const out = [];
  for (const svg of main ? [...main.querySelectorAll("svg")].filter(isChart) : []) {
    const box = svg.getBoundingClientRect();
    const title = svg.textContent.replace(/\s+/g, " ").trim().slice(0, 50);
    const rect = svg.querySelector("rect");
    const r = rect && rect.getBoundingClientRect();
    const style = rect && getComputedStyle(rect);
    const fill = style && parse(style.fill);
    const covers = r && r.width >= box.width * 0.95 && r.height >= box.height * 0.95;
    if (!covers || !fill || fill.alpha * Number(style.fillOpacity) < 0.9) {
      out.push({ title, card: false, contrast: 0 });
      continue;
    }
    const card = luminance(fill.rgb);
    let worst = 21;
    for (const t of svg.querySelectorAll("text")) {
      const ink = parse(getComputedStyle(t).fill);
      if (ink) worst = Math.min(worst, ratio(card, luminance(ink.rgb)));
    }
    out.push({ title, card: true, contrast: Math.round(worst * 10) / 10 });
  }
  return out;
}

async function checkChapter(browser, base, chapter, opts) {
  const problems = [];
  const notes = [];
  const context = await browser.newContext({ viewport: WIDE });
  if (opts.theme) {
    await context.addInitScript((theme) => {
      localStorage.setItem("mdbook-theme", theme);
    }, opts.theme);
  }
  const page = await context.newPage();
  const errors = [];
  page.on("pageerror", (e) => errors.push(e.message));
  let screens = null;
  try {
    const response = await page.goto(`${base}/${chapter.html}`, { waitUntil: "load" });
    if (!response || response.status() !== 200) {
      problems.push(`does not render: HTTP ${response ? response.status() : "no response"} for ${chapter.html}`);
      return { problems, notes, screens };
    }
    await page.waitForTimeout(100);
    const wide = await page.evaluate(measure);
    screens = wide.height / WIDE.height;
    if (!wide.title) problems.push("does not render: no heading in <main>");
    for (const e of errors) problems.push(`does not render: script error: ${e}`);
    const directive = wide.text.match(/\{\{#[^}]*\}\}/);
    if (directive) problems.push(`does not render: directive left in the text: ${directive[0]}`);
    const dash = wide.text.match(/(^|\s)(–[A-Za-z][\w-]*)/);
    if (dash) {
      const at = wide.text.indexOf(dash[2]);
      const around = wide.text.slice(Math.max(0, at - 30), at + 30).replace(/\s+/g, " ");
      problems.push(`flag printed with an en dash: "${dash[2]}" in "...${around}..."`);
    }
    const codeDash = wide.code.match(/(^|\s)(–[A-Za-z][\w-]*)/);
    if (codeDash) problems.push(`flag printed with an en dash in code: "${codeDash[2]}"`);
    for (const want of chapter.charts.filter((c) => c.title === null)) {
      notes.push(`the source names ${want.file}, found in no results folder: not checked`);
    }
    for (const want of chapter.charts.filter((c) => c.title !== null)) {
      const found = wide.charts.find((c) => c.text.includes(want.title));
      if (!found) {
        problems.push(`chart missing from the page: ${want.file} ("${want.title}")`);
      }
    }
    for (const c of wide.charts) {
      if (c.width > wide.mainWidth + 1 || c.right > wide.visibleRight + 1) {
        problems.push(
          `chart wider than the page at 1280 px: "${c.text.slice(0, 50)}" is ${c.width} px ` +
            `in a ${wide.mainWidth} px column`,
        );
      }
    }
    // Each theme in turn, then back to the one the page opened with.
    const opened = await page.evaluate(() => document.documentElement.className);
    for (const theme of THEMES) {
      for (const c of await page.evaluate(chartContrast, theme)) {
        if (!c.card) {
          problems.push(`chart without a card of its own (an opaque background) in the ${theme} theme: "${c.title}"`);
        } else if (c.contrast < 4.5) {
          problems.push(
            `chart text hard to read in the ${theme} theme: contrast ${c.contrast}:1 ` +
              `against its card (at least 4.5:1): "${c.title}"`,
          );
        }
      }
    }
    await page.evaluate((c) => { document.documentElement.className = c; }, opened);
    if (wide.overflow > 1) {
      problems.push(
        `page scrolls sideways at 1280 px, by ${wide.overflow} px; ` +
          `sticking out: ${wide.sticking.join(", ") || "?"}`,
      );
    }
    for (const t of wide.tables) {
      if (t.width > wide.mainWidth + 1) {
        notes.push(`table "${t.header}" is ${t.width} px in a ${wide.mainWidth} px column (scrolls in its box)`);
      }
    }
    // A worksheet is handed out on paper: at most two A4 pages, printed
    // as the browser prints it (mdBook's print style, no sidebar).
    if (chapter.name.endsWith("-worksheet")) {
      const pdf = await page.pdf({ format: "A4", margin: { top: "15mm", bottom: "15mm", left: "15mm", right: "15mm" } });
      const pages = (pdf.toString("latin1").match(/\/Type\s*\/Page(?!s)/g) || []).length;
      if (pages > 2 || pages === 0) {
        problems.push(`worksheet prints on ${pages} A4 pages (at most 2)`);
      } else {
        notes.push(`prints on ${pages} A4 page${pages === 1 ? "" : "s"}`);
      }
    }
    fs.mkdirSync(opts.out, { recursive: true });
    const shot = path.join(opts.out, `${chapter.name.replace(/\//g, "__")}${opts.theme ? `-${opts.theme}` : ""}.png`);
    await page.screenshot({ path: shot, fullPage: true });
    // A phone: a fresh page, so that mdBook lays it out (sidebar folded)
    // as it would on load at this width.
    const narrowContext = await browser.newContext({ viewport: NARROW });
    let narrow;
    try {
      const small = await narrowContext.newPage();
      await small.goto(`${base}/${chapter.html}`, { waitUntil: "load" });
      await small.waitForTimeout(100);
      narrow = await small.evaluate(measure);
    } finally {
      await narrowContext.close();
    }
    for (const c of narrow.charts) {
      if (c.width > narrow.mainWidth + 1 || c.right > narrow.visibleRight + 1) {
        problems.push(
          `chart wider than the page at 420 px: "${c.text.slice(0, 50)}" is ${c.width} px ` +
            `in a ${narrow.mainWidth} px column`,
        );
      }
    }
    for (const v of narrow.hiddenVerdicts) {
      problems.push(`a verdict is out of view at 420 px (the table must be scrolled to see it): "${v}"`);
    }
    if (narrow.overflow > 1) {
      problems.push(
        `page scrolls sideways at 420 px, by ${narrow.overflow} px; ` +
          `sticking out: ${narrow.sticking.join(", ") || "?"}`,
      );
    }
  } catch (e) {
    problems.push(`does not render: ${e.message.split("\n")[0]}`);
  } finally {
    await context.close();
  }
  return { problems, notes, screens };
}

async function withBrowser(fn) {
  const executablePath = process.env.CHROMIUM || "/usr/bin/chromium";
  if (!fs.existsSync(executablePath)) {
    if (process.env.CI === "true") {
      console.log(`FAIL - chromium not found at ${executablePath} (CI=true: the browser check cannot be skipped)`);
      console.log("0 passed, 1 failed");
      process.exit(1);
    }
    console.log(`skipped: chromium not found at ${executablePath} (set CHROMIUM or install chromium)`);
    process.exit(0);
  }
  const browser = await chromium.launch({ executablePath, headless: true, args: LAUNCH_ARGS });
  try {
    return await fn(browser);
  } finally {
    await browser.close();
  }
}

async function checkBook(browser, siteDir, list, opts, report) {
  const server = await serve(path.resolve(siteDir));
  const base = `http://127.0.0.1:${server.address().port}`;
  const results = [];
  try {
    for (const chapter of list) {
      const r = await checkChapter(browser, base, chapter, opts);
      results.push({ chapter, ...r });
      if (report) {
        const screens = r.screens === null ? "" : ` (${r.screens.toFixed(1)} screens)`;
        if (r.problems.length === 0) {
          console.log(`ok - ${chapter.name}${screens}`);
        } else {
          console.log(`FAIL - ${chapter.name}${screens}`);
          for (const p of r.problems) console.log(`    ${p}`);
        }
        for (const n of r.notes) console.log(`    note: ${n}`);
      }
    }
  } finally {
    server.close();
  }
  return results;
}

/// An edit of a page's <main> only (mdBook's own icons are SVG too).
function inMain(edit) {
  return (html) => {
    const at = html.indexOf("<main>");
    return at < 0 ? html : html.slice(0, at) + edit(html.slice(at));
  };
}

/// Breaks copies of the built pages, one way per case, and checks that each
/// is caught with the expected reason.
async function selfTest(browser, siteDir, list, opts) {
  const withCharts = list.find((c) => c.charts.some((x) => x.title !== null));
  const plain = list[0];
  const tmp = fs.mkdtempSync(path.join(os.tmpdir(), "book-check-"));
  const cases = [
    {
      name: "an over-wide element makes the page scroll sideways",
      chapter: plain,
      edit: (h) => h.replace(/<main>/, '<main><div style="width:1500px">wide</div>'),
      expect: /page scrolls sideways at 1280 px/,
    },
    {
      name: "a verdict column pushed out of view at 420 px",
      chapter: plain,
      edit: (h) =>
        h.replace(
          /<main>/,
          '<main><div class="table-wrapper" style="overflow-x:auto"><table><thead><tr>' +
            '<th>claim</th><th>verdict</th></tr></thead><tbody><tr>' +
            '<td><div style="width:700px">a wide claim</div></td><td>holds</td></tr></tbody></table></div>',
        ),
      expect: /a verdict is out of view at 420 px/,
    },
    {
      name: "an element wider than a phone makes the page scroll at 420 px",
      chapter: plain,
      edit: (h) => h.replace(/<main>/, '<main><div style="width:600px;height:4px"></div>'),
      expect: /page scrolls sideways at 420 px/,
    },
    {
      name: "a flag printed with an en dash is caught",
      chapter: plain,
      edit: (h) => h.replace(/<main>/, "<main><p>run forkcreat \u2013reap sigchld</p>"),
      expect: /en dash: "\u2013reap"/,
    },
    {
      name: "a chart missing from the page is caught",
      chapter: withCharts,
      edit: inMain((m) => m.replace(/<svg[\s\S]*?<\/svg>/g, "")),
      expect: /chart missing from the page/,
    },
    {
      name: "a chart wider than the page is caught",
      chapter: withCharts,
      edit: inMain((m) => m.replace(/<svg /, '<svg style="width:1400px;max-width:none" ')),
      expect: /chart wider than the page/,
    },
    {
      name: "a chart without a card of its own is caught",
      chapter: withCharts,
      edit: inMain((m) => m.replace(/<svg([^>]*)>/, '<svg$1><rect width="100%" height="100%" fill="none"/>')),
      expect: /chart without a card of its own/,
    },
    {
      name: "a chart whose card stays white in a dark theme is caught",
      chapter: withCharts,
      // The card kept white while the ink turns light, as a chart whose
      // card has lost its class would look.
      edit: inMain(
        (m) =>
          '<style>html.coal main svg rect { fill: #fff !important } ' +
          "html.coal main svg text { fill: #e2e2e2 !important }</style>" + m,
      ),
      expect: /chart text hard to read in the (coal|navy|ayu) theme/,
    },
    {
      name: "a directive left in the text is caught",
      chapter: plain,
      edit: (h) => h.replace(/<main>/, "<main><p>{{#figure pipe-speed peak}}</p>"),
      expect: /directive left in the text/,
    },
    {
      name: "a worksheet longer than two A4 pages is caught",
      chapter: list.find((c) => c.name.endsWith("-worksheet")),
      edit: (h) => h.replace(/<main>([\s\S]*?)<\/main>/, (_, inner) => `<main>${inner.repeat(6)}</main>`),
      expect: /worksheet prints on \d+ A4 pages/,
    },
    {
      name: "a missing page is caught",
      chapter: plain,
      remove: true,
      expect: /does not render: HTTP 404/,
    },
  ];
  let passed = 0;
  let failed = 0;
  try {
    for (const c of cases) {
      if (!c.chapter) {
        console.log(`FAIL - self-test: ${c.name}: no chapter to break`);
        failed++;
        continue;
      }
      const dir = path.join(tmp, String(passed + failed));
      fs.cpSync(siteDir, dir, { recursive: true });
      const file = path.join(dir, c.chapter.html);
      if (c.remove) fs.rmSync(file);
      else fs.writeFileSync(file, c.edit(fs.readFileSync(file, "utf8")));
      const [r] = await checkBook(browser, dir, [c.chapter], { ...opts, out: path.join(tmp, "shots") }, false);
      if (r.problems.some((p) => c.expect.test(p))) {
        console.log(`ok - self-test: ${c.name}`);
        passed++;
      } else {
        console.log(`FAIL - self-test: ${c.name}: not caught (problems: ${r.problems.join("; ") || "none"})`);
        failed++;
      }
      fs.rmSync(dir, { recursive: true, force: true });
    }
  } finally {
    fs.rmSync(tmp, { recursive: true, force: true });
  }
  return { passed, failed };
}

async function main() {
  const opts = parseArgs(process.argv.slice(2));
  const bookDir = path.resolve(opts.root, opts.book);
  // --site: another build of the book's pages (`lab book`'s edition of a
  // reader's run); by default the book's own build.
  const siteDir = opts.site ? path.resolve(opts.root, opts.site) : buildDir(bookDir);
  if (!fs.existsSync(path.join(siteDir, "index.html"))) {
    console.log(`FAIL - book not built: no ${path.join(siteDir, "index.html")} (run mdbook build ${opts.book})`);
    console.log("0 passed, 1 failed");
    process.exit(1);
  }
  let list = chapters(bookDir).map((c) => ({ ...c, charts: expectedCharts(c, opts.root) }));
  if (opts.only) {
    const wanted = opts.only.split(",");
    list = list.filter((c) => wanted.includes(c.name));
  }
  if (list.length === 0) usage(`no chapter to check${opts.only ? ` named ${opts.only}` : ""}`);
  const totals = await withBrowser(async (browser) => {
    let passed = 0;
    let failed = 0;
    if (opts.selfTest) {
      const s = await selfTest(browser, siteDir, list, opts);
      passed += s.passed;
      failed += s.failed;
    }
    const results = await checkBook(browser, siteDir, list, opts, true);
    for (const r of results) {
      if (r.problems.length === 0) passed++;
      else failed++;
    }
    const measured = results.filter((r) => r.screens !== null);
    const total = measured.reduce((sum, r) => sum + r.screens, 0);
    console.log(
      `book-check: lengths in screens of ${WIDE.width}x${WIDE.height} (page height / ${WIDE.height} px): ` +
        measured.map((r) => `${r.chapter.name} ${r.screens.toFixed(1)}`).join(", ") +
        `; total ${total.toFixed(1)}`,
    );
    console.log(`book-check: screenshots (full page, ${WIDE.width} px wide) in ${path.resolve(opts.out)}`);
    return { passed, failed };
  });
  console.log(`${totals.passed} passed, ${totals.failed} failed`);
  process.exit(totals.failed > 0 ? 1 : 0);
}

main().catch((e) => {
  console.log(`FAIL - book-check crashed: ${e.stack || e}`);
  console.log("0 passed, 1 failed");
  process.exit(1);
});
