//! `memlens report DIR --html FILE`: the report as one self-contained page,
//! drawn by the template `templates/report.html` from the same sections as the
//! text report. Figures are inline SVG (the plots of `memlens plot`) that a
//! few lines of inline script zoom and pan: nothing is fetched, so the file
//! opens offline and can be mailed.

use super::job::{job_sections, JobReport};
use super::model::{Figure, Section};
use super::sections::sections;
use super::Report;
use crate::plot::{
    plot_bandwidth, plot_capacity, plot_fold, plot_rank_band, plot_rank_map, plot_scatter, Image,
    RankMeasure,
};
use memlens_profile::Profile;
use serde::Serialize;

const TEMPLATE: &str = include_str!("../../templates/report.html");

#[derive(Serialize)]
struct Page<'a> {
    command: String,
    profile: &'a str,
    version: &'a str,
    sections: Vec<PageSection>,
}

#[derive(Serialize)]
struct PageSection {
    #[serde(flatten)]
    section: Section,
    figures: Vec<DrawnFigure>,
}

#[derive(Serialize)]
struct DrawnFigure {
    svg: String,
    caption: &'static str,
}

/// The whole report as one HTML page.
pub fn render_html(p: &Profile, r: &Report) -> String {
    page(
        r.summary.command.join(" "),
        &r.profile,
        &r.memlens_version,
        sections(r),
        |f| draw(p, r, f),
    )
}

/// A job's report as one HTML page.
pub fn render_job_html(j: &JobReport) -> String {
    page(
        j.command.join(" "),
        &j.profile,
        &j.memlens_version,
        job_sections(j),
        |figure| {
            let mut svg = String::new();
            let drawn = match figure {
                Figure::RankBand => plot_rank_band(&j.job, Image::Svg(&mut svg)),
                Figure::RankMap => plot_rank_map(&j.job, RankMeasure::Rss, Image::Svg(&mut svg)),
                _ => return None,
            };
            drawn_figure(figure, drawn, svg)
        },
    )
}

/// A page of sections, each with the figures `draw` gives it.
fn page(
    command: String,
    profile: &str,
    version: &str,
    sections: Vec<Section>,
    draw: impl Fn(Figure) -> Option<DrawnFigure>,
) -> String {
    let sections = sections
        .into_iter()
        .map(|section| PageSection {
            figures: section.figures.iter().filter_map(|&f| draw(f)).collect(),
            section,
        })
        .collect();
    let page = Page {
        command,
        profile,
        version,
        sections,
    };
    let mut env = minijinja::Environment::new();
    env.add_template("report.html", TEMPLATE)
        .and_then(|()| {
            env.get_template("report.html")?
                .render(minijinja::value::Serde(&page))
        })
        .expect("the report template renders any report (tested)")
}

/// A figure as SVG, or nothing when the plot has nothing to draw.
fn draw(p: &Profile, r: &Report, figure: Figure) -> Option<DrawnFigure> {
    let mut svg = String::new();
    let drawn = match figure {
        Figure::Capacity => plot_capacity(p, Image::Svg(&mut svg)),
        Figure::Bandwidth => plot_bandwidth(p, Image::Svg(&mut svg)),
        Figure::Scatter => plot_scatter(p, Image::Svg(&mut svg)),
        Figure::Fold => {
            let f = r.folding.content.as_ref()?;
            plot_fold(p, f.by(), f.bins.len(), Image::Svg(&mut svg))
        }
        Figure::RankBand | Figure::RankMap => return None,
    };
    drawn_figure(figure, drawn, svg)
}

fn drawn_figure(
    figure: Figure,
    drawn: Result<(), crate::PlotError>,
    svg: String,
) -> Option<DrawnFigure> {
    (drawn.is_ok() && !svg.is_empty()).then(|| DrawnFigure {
        svg,
        caption: figure.caption(),
    })
}
