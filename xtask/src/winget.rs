//! The winget manifests (schema 1.9.0) for the Windows archive: a zip
//! whose nested `turnback.exe` winget installs as a portable command, the
//! three files a submission to microsoft/winget-pkgs holds, in its layout
//! (`manifests/t/turnback/turnback/<version>/`).

use std::path::Path;

use crate::dist::{Archive, Release, create_dir, write};

pub const IDENTIFIER: &str = "turnback.turnback";
const SCHEMA: &str = "1.9.0";

pub fn write_manifests(dir: &Path, release: &Release, windows: &Archive) -> anyhow::Result<()> {
    let v = &release.version;
    let dir = dir.join("manifests/t/turnback/turnback").join(v);
    create_dir(&dir)?;
    let header = |kind: &str| {
        format!(
            "# Written by `cargo xtask dist` for release {v}.\n# yaml-language-server: $schema=https://aka.ms/winget-manifest.{kind}.{SCHEMA}.schema.json\n\n"
        )
    };
    let version = format!(
        "{}PackageIdentifier: {IDENTIFIER}\nPackageVersion: {v}\nDefaultLocale: en-US\nManifestType: version\nManifestVersion: {SCHEMA}\n",
        header("version")
    );
    let stem = windows.target.stem(v);
    let installer = format!(
        "{}PackageIdentifier: {IDENTIFIER}\nPackageVersion: {v}\nInstallerType: zip\nNestedInstallerType: portable\nNestedInstallerFiles:\n- RelativeFilePath: {stem}\\turnback.exe\n  PortableCommandAlias: turnback\nCommands:\n- turnback\nInstallers:\n- Architecture: x64\n  InstallerUrl: {}/{}\n  InstallerSha256: {}\nManifestType: installer\nManifestVersion: {SCHEMA}\n",
        header("installer"),
        release.base_url,
        windows.name(),
        windows.sha256.to_uppercase()
    );
    let locale = format!(
        "{}PackageIdentifier: {IDENTIFIER}\nPackageVersion: {v}\nPackageLocale: en-US\nPublisher: The turnback developers\nPublisherUrl: {repo}\nPackageName: turnback\nPackageUrl: {repo}\nLicense: MIT OR Apache-2.0\nLicenseUrl: {repo}/blob/v{v}/LICENSE-MIT\nShortDescription: Exact, crash-safe rewinds of a project folder for AI coding agents\nMoniker: turnback\nTags:\n- ai\n- agent\n- checkpoint\n- rewind\n- undo\nReleaseNotesUrl: {repo}/releases/tag/v{v}\nManifestType: defaultLocale\nManifestVersion: {SCHEMA}\n",
        header("defaultLocale"),
        repo = release.repository,
    );
    for (name, text) in [
        (format!("{IDENTIFIER}.yaml"), version),
        (format!("{IDENTIFIER}.installer.yaml"), installer),
        (format!("{IDENTIFIER}.locale.en-US.yaml"), locale),
    ] {
        write(&dir.join(name), text.as_bytes())?;
    }
    Ok(())
}
