//! A result as a person reads it: text as text, structured content pretty printed, images and
//! audio (and binary resources) written to files whose paths are printed, resource links and
//! embedded text resources summarised. Every piece of the server's text is made visible
//! (`terminal::visible`), and a file name never comes from the server.

use std::path::{Path, PathBuf};

use anyhow::Context as _;
use base64::Engine as _;
use serde_json::Value;
use toolwire_client::protocol::{CallToolResult, ContentBlock, ResourceContents};

use crate::terminal::{Json, Layout, json, out, visible};

/// Prints `result`; media goes to files in `dir`, named after `tool`.
pub(crate) fn print(result: &CallToolResult, tool: &str, dir: &Path) -> anyhow::Result<()> {
    let mut files = Files::new(dir, tool);
    // Structured content is shown, pretty printed, in place of the text that only serializes
    // it (T-11) or when there is no text; text written for people is shown instead of it.
    let repeats = |text: &str| {
        result
            .structured_content
            .as_ref()
            .is_some_and(|s| serde_json::from_str::<Value>(text).is_ok_and(|t| &t == s))
    };
    let texts: Vec<&str> = result
        .content
        .iter()
        .filter_map(|b| match b {
            ContentBlock::Text(t) => Some(t.text.as_str()),
            _ => None,
        })
        .collect();
    if let Some(structured) = &result.structured_content {
        if texts.is_empty() || texts.iter().any(|t| repeats(t)) {
            out(&json(structured, Json::Pretty)?)?;
        }
    }
    for block in &result.content {
        match block {
            ContentBlock::Text(text) if repeats(&text.text) => {}
            block => print_block(block, &mut files)?,
        }
    }
    Ok(())
}

/// One content block: text as text, media saved to a file, a link or resource summarised.
fn print_block(block: &ContentBlock, files: &mut Files<'_>) -> anyhow::Result<()> {
    match block {
        ContentBlock::Text(text) => out(&visible(&text.text, Layout::Text))?,
        ContentBlock::Image(image) => {
            let path = files.save("image", &image.mime_type, &image.data)?;
            out(&format!(
                "[image {} saved to {}]",
                visible(&image.mime_type, Layout::Line),
                path.display()
            ))?;
        }
        ContentBlock::Audio(audio) => {
            let path = files.save("audio", &audio.mime_type, &audio.data)?;
            out(&format!(
                "[audio {} saved to {}]",
                visible(&audio.mime_type, Layout::Line),
                path.display()
            ))?;
        }
        ContentBlock::ResourceLink(link) => {
            let mut line = format!(
                "[link {} {}",
                visible(link.title.as_deref().unwrap_or(&link.name), Layout::Line),
                visible(&link.uri, Layout::Line)
            );
            if let Some(mime) = &link.mime_type {
                line.push_str(&format!(" ({})", visible(mime, Layout::Line)));
            }
            line.push(']');
            if let Some(description) = &link.description {
                line.push_str(&format!(" {}", visible(description, Layout::Line)));
            }
            out(&line)?;
        }
        ContentBlock::EmbeddedResource(embedded) => print_resource(&embedded.resource, files)?,
        other => out(&json(other, Json::Compact)?)?,
    }
    Ok(())
}

/// An embedded resource: its text shown, or its bytes saved to a file.
fn print_resource(resource: &ResourceContents, files: &mut Files<'_>) -> anyhow::Result<()> {
    match resource {
        ResourceContents::Text(text) => {
            out(&format!(
                "[resource {}]\n{}",
                visible(&text.uri, Layout::Line),
                visible(&text.text, Layout::Text)
            ))?;
        }
        ResourceContents::Blob(blob) => {
            let mime = blob
                .mime_type
                .as_deref()
                .unwrap_or("application/octet-stream");
            let path = files.save("resource", mime, &blob.blob)?;
            out(&format!(
                "[resource {} ({}) saved to {}]",
                visible(&blob.uri, Layout::Line),
                visible(mime, Layout::Line),
                path.display()
            ))?;
        }
    }
    Ok(())
}

/// Files for a result's media, numbered, never overwriting one that exists.
struct Files<'a> {
    dir: &'a Path,
    stem: String,
}

impl<'a> Files<'a> {
    fn new(dir: &'a Path, tool: &str) -> Files<'a> {
        // The tool's name is the server's text: only safe characters reach the file system.
        let stem: String = tool
            .chars()
            .map(|c| {
                if c.is_ascii_alphanumeric() || c == '-' || c == '_' {
                    c
                } else {
                    '_'
                }
            })
            .take(64)
            .collect();
        Files { dir, stem }
    }

    fn save(&mut self, kind: &str, mime: &str, base64: &str) -> anyhow::Result<PathBuf> {
        let bytes = base64::engine::general_purpose::STANDARD
            .decode(base64.trim())
            .with_context(|| format!("the {kind} is not valid base64"))?;
        std::fs::create_dir_all(self.dir)
            .with_context(|| format!("cannot create {}", self.dir.display()))?;
        let extension = extension(mime);
        let mut n = 0u32;
        loop {
            n += 1;
            let path = self
                .dir
                .join(format!("{}-{kind}-{n}.{extension}", self.stem));
            let file = std::fs::OpenOptions::new()
                .write(true)
                .create_new(true)
                .open(&path);
            match file {
                Ok(mut file) => {
                    std::io::Write::write_all(&mut file, &bytes)
                        .with_context(|| format!("writing {}", path.display()))?;
                    return Ok(path);
                }
                Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => continue,
                Err(e) => return Err(e).with_context(|| format!("creating {}", path.display())),
            }
        }
    }
}

/// A file extension for a MIME type.
fn extension(mime: &str) -> &'static str {
    match mime.split(';').next().unwrap_or("").trim() {
        "image/png" => "png",
        "image/jpeg" => "jpg",
        "image/gif" => "gif",
        "image/webp" => "webp",
        "image/svg+xml" => "svg",
        "image/bmp" => "bmp",
        "audio/wav" | "audio/x-wav" | "audio/wave" => "wav",
        "audio/mpeg" => "mp3",
        "audio/ogg" => "ogg",
        "audio/flac" => "flac",
        "audio/webm" => "weba",
        "application/pdf" => "pdf",
        "application/json" => "json",
        "text/plain" => "txt",
        _ => "bin",
    }
}
