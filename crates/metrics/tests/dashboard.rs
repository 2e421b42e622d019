//! The dashboard in a real browser: headless Chromium loads it from a
//! `MetricsServer` whose counters grow on every poll, runs it for a few
//! seconds of virtual time, then dumps the DOM and takes a screenshot.
//!
//! The page writes what it drew into `<pre id="test-report">`: each graph's
//! canvas box (CSS pixels) and how many points (bars for the histogram) it
//! plotted. The test requires every graph to have at least two, then decodes
//! the screenshot and requires coloured (plotted) pixels inside every box:
//! axes, grid and labels are grey, so only data makes saturated pixels.
//!
//! Needs Debian's `chromium` (`ci/deps.sh` installs it); `RNFS_CHROMIUM`
//! names another binary. `RNFS_SKIP_BROWSER_TESTS=1` skips the test.
//! `RNFS_DASHBOARD_SCREENSHOT=FILE` keeps a copy of the screenshot.

#![allow(clippy::unwrap_used, clippy::expect_used, reason = "tests")]

mod common;

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use rnfs_metrics::MetricsServer;

/// Window size, CSS pixels (the device scale factor is forced to 1).
const WIDTH: u32 = 1200;
const HEIGHT: u32 = 1600;
/// Poll interval asked of the page, and the virtual time it runs for: about
/// 30 polls, well above the 2 points every graph needs.
const INTERVAL_MS: u32 = 100;
const VIRTUAL_TIME_MS: u32 = 3000;
/// Graphs the page must report.
const GRAPHS: [&str; 9] = [
    "calls",
    "latency",
    "bytes",
    "threads",
    "handoff",
    "wakeups",
    "errors",
    "conns",
    "histogram",
];
/// Fewest plotted (saturated) pixels a graph's box must hold.
const MIN_PLOTTED_PIXELS: usize = 40;
/// Real-time limit for one Chromium run.
const CHROMIUM_TIMEOUT: Duration = Duration::from_secs(120);

fn find_chromium() -> Option<PathBuf> {
    if let Some(p) = std::env::var_os("RNFS_CHROMIUM") {
        return Some(PathBuf::from(p)).filter(|p| p.is_file());
    }
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .flat_map(|dir| ["chromium", "chromium-browser"].map(|name| dir.join(name)))
        .find(|p| p.is_file())
}

/// Runs Chromium on `url` with `extra` arguments; returns its stdout.
fn chromium(binary: &Path, profile: &Path, extra: &[String], url: &str) -> String {
    let mut child = Command::new(binary)
        .args([
            "--headless=new",
            "--no-sandbox",
            "--disable-gpu",
            "--disable-dev-shm-usage",
            "--no-first-run",
            "--no-default-browser-check",
            "--disable-extensions",
            "--hide-scrollbars",
            "--force-device-scale-factor=1",
            "--force-color-profile=srgb",
            &format!("--user-data-dir={}", profile.display()),
            &format!("--window-size={WIDTH},{HEIGHT}"),
            &format!("--virtual-time-budget={VIRTUAL_TIME_MS}"),
        ])
        .args(extra)
        .arg(url)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| panic!("cannot run {}: {e}", binary.display()));
    // Read both pipes on threads so a chatty Chromium cannot block on them.
    let mut stdout = child.stdout.take().unwrap();
    let mut stderr = child.stderr.take().unwrap();
    let out = std::thread::spawn(move || {
        let mut s = String::new();
        std::io::Read::read_to_string(&mut stdout, &mut s).map(|_| s)
    });
    let err = std::thread::spawn(move || {
        let mut s = String::new();
        std::io::Read::read_to_string(&mut stderr, &mut s).map(|_| s)
    });
    let start = Instant::now();
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break status;
        }
        if start.elapsed() > CHROMIUM_TIMEOUT {
            let _ = child.kill();
            let _ = child.wait();
            panic!("chromium did not finish within {CHROMIUM_TIMEOUT:?}");
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    let out = out.join().unwrap().unwrap_or_default();
    let err = err.join().unwrap().unwrap_or_default();
    assert!(status.success(), "chromium failed ({status}):\n{err}");
    out
}

/// One graph as the page reported it.
#[derive(Debug)]
struct Graph {
    id: String,
    points: u64,
    x: u32,
    y: u32,
    w: u32,
    h: u32,
}

/// Reads the page's test report out of the dumped DOM.
fn test_report(dom: &str) -> (u64, Vec<Graph>) {
    let start = dom
        .rfind("<pre id=\"test-report\"")
        .unwrap_or_else(|| panic!("no test report in the DOM:\n{dom}"));
    let open = start + dom[start..].find('>').unwrap() + 1;
    let close = open + dom[open..].find("</pre>").unwrap();
    // The DOM dump escapes text: `"` stays, `&` `<` `>` would be entities.
    let json = dom[open..close].replace("&amp;", "&");
    assert!(
        !json.is_empty(),
        "the page wrote no test report: its script did not run (a JavaScript error?)"
    );
    let v: serde_json::Value =
        serde_json::from_str(&json).unwrap_or_else(|e| panic!("bad test report {json:?}: {e}"));
    assert!(
        v["error"].is_null(),
        "the page reported an error: {}",
        v["error"]
    );
    let polls = v["polls"].as_u64().unwrap();
    let graphs = v["graphs"]
        .as_array()
        .unwrap()
        .iter()
        .map(|g| Graph {
            id: g["id"].as_str().unwrap().to_owned(),
            points: g["points"].as_u64().unwrap(),
            x: g["x"].as_u64().unwrap() as u32,
            y: g["y"].as_u64().unwrap() as u32,
            w: g["w"].as_u64().unwrap() as u32,
            h: g["h"].as_u64().unwrap() as u32,
        })
        .collect();
    (polls, graphs)
}

/// An RGB(A) image.
struct Image {
    width: u32,
    height: u32,
    channels: usize,
    pixels: Vec<u8>,
}

impl Image {
    fn decode(path: &Path) -> Image {
        let file = std::fs::File::open(path).unwrap();
        let mut decoder = png::Decoder::new(std::io::BufReader::new(file));
        decoder.set_transformations(png::Transformations::normalize_to_color8());
        let mut reader = decoder.read_info().unwrap();
        let mut pixels = vec![0; reader.output_buffer_size().unwrap()];
        let info = reader.next_frame(&mut pixels).unwrap();
        let channels = match info.color_type {
            png::ColorType::Rgb => 3,
            png::ColorType::Rgba => 4,
            other => panic!("unexpected screenshot colour type {other:?}"),
        };
        pixels.truncate(info.buffer_size());
        Image {
            width: info.width,
            height: info.height,
            channels,
            pixels,
        }
    }

    fn rgb(&self, x: u32, y: u32) -> [u8; 3] {
        let i = (y as usize * self.width as usize + x as usize) * self.channels;
        [self.pixels[i], self.pixels[i + 1], self.pixels[i + 2]]
    }

    /// Pixels in the box whose colour is saturated: plotted data, not the
    /// grey background, grid, axes or labels.
    fn plotted_pixels(&self, g: &Graph) -> usize {
        let mut n = 0;
        for y in g.y..(g.y + g.h).min(self.height) {
            for x in g.x..(g.x + g.w).min(self.width) {
                let [r, gr, b] = self.rgb(x, y);
                let (max, min) = (r.max(gr).max(b), r.min(gr).min(b));
                if max - min >= 80 {
                    n += 1;
                }
            }
        }
        n
    }
}

#[test]
fn dashboard_draws_every_graph_in_headless_chromium() {
    if std::env::var_os("RNFS_SKIP_BROWSER_TESTS").is_some_and(|v| v == "1") {
        eprintln!("skipped: RNFS_SKIP_BROWSER_TESTS=1");
        return;
    }
    let Some(binary) = find_chromium() else {
        panic!(
            "chromium not found: install chromium (ci/deps.sh), \
             or set RNFS_SKIP_BROWSER_TESTS=1 to skip this test"
        );
    };
    let server =
        MetricsServer::start("127.0.0.1:0".parse().unwrap(), common::growing_source()).unwrap();
    let url = format!("http://{}/?interval_ms={INTERVAL_MS}", server.local_addr());
    let dir = tempfile::tempdir().unwrap();
    let shot = dir.path().join("dashboard.png");

    // Two runs of the same page: the DOM (with the report), then the picture.
    // The layout depends only on the window size, so the boxes match.
    let dom = chromium(
        &binary,
        &dir.path().join("profile-dom"),
        &["--dump-dom".to_owned()],
        &url,
    );
    let (polls, graphs) = test_report(&dom);
    chromium(
        &binary,
        &dir.path().join("profile-shot"),
        &[format!("--screenshot={}", shot.display())],
        &url,
    );
    server.shutdown();

    assert!(polls >= 3, "the page polled only {polls} times");
    let ids: Vec<&str> = graphs.iter().map(|g| g.id.as_str()).collect();
    for id in GRAPHS {
        assert!(
            ids.contains(&id),
            "graph {id} missing from the report {ids:?}"
        );
    }
    let image = Image::decode(&shot);
    assert_eq!((image.width, image.height), (WIDTH, HEIGHT));
    if let Some(keep) = std::env::var_os("RNFS_DASHBOARD_SCREENSHOT") {
        std::fs::copy(&shot, keep).unwrap();
    }
    for g in &graphs {
        assert!(g.points >= 2, "graph {} drew {} points", g.id, g.points);
        assert!(
            g.w >= 100 && g.h >= 100 && g.x + g.w <= WIDTH && g.y + g.h <= HEIGHT,
            "graph {} is not inside the window: {g:?}",
            g.id
        );
        let plotted = image.plotted_pixels(g);
        assert!(
            plotted >= MIN_PLOTTED_PIXELS,
            "graph {} has {plotted} plotted pixels in {g:?}",
            g.id
        );
    }
    // And the page is not just colourful everywhere: the header strip has no data.
    let header = Graph {
        id: "header".into(),
        points: 0,
        x: 0,
        y: 0,
        w: WIDTH,
        h: 8,
    };
    assert!(image.plotted_pixels(&header) < MIN_PLOTTED_PIXELS);
}
