# Installs turnback @VERSION@ on Windows (x64; Windows on Arm runs it
# emulated): downloads the archive and SHA256SUMS from the release, refuses
# the archive unless its SHA-256 is the one SHA256SUMS gives, and puts
# turnback.exe in the install folder. It asks nothing.
#
#   powershell -ExecutionPolicy Bypass -c "irm @BASE_URL@/install.ps1 | iex"
#   .\install.ps1 [-BaseUrl URL] [-InstallDir DIR]
#
# -BaseUrl URL     where the archives and SHA256SUMS are (default @BASE_URL@)
# -InstallDir DIR  where turnback.exe goes (default ~\.local\bin)
#
# Written by `cargo xtask dist`.
param(
    [string]$BaseUrl = '@BASE_URL@',
    [string]$InstallDir = (Join-Path (Join-Path $HOME '.local') 'bin')
)
$ErrorActionPreference = 'Stop'
$ProgressPreference = 'SilentlyContinue'

$version = '@VERSION@'
$target = 'x86_64-pc-windows-gnu'
$stem = "turnback-$version-$target"
$archive = "$stem.zip"
$BaseUrl = $BaseUrl.TrimEnd('/')

$tmp = Join-Path ([System.IO.Path]::GetTempPath()) ("turnback-install-" + [System.Guid]::NewGuid())
New-Item -ItemType Directory -Path $tmp | Out-Null
try {
    $sums = Join-Path $tmp 'SHA256SUMS'
    $zip = Join-Path $tmp $archive
    Invoke-WebRequest -UseBasicParsing -Uri "$BaseUrl/SHA256SUMS" -OutFile $sums
    Invoke-WebRequest -UseBasicParsing -Uri "$BaseUrl/$archive" -OutFile $zip

    $expected = $null
    foreach ($line in Get-Content -Path $sums) {
        $fields = $line -split '\s+', 2
        if ($fields.Count -eq 2 -and $fields[1].TrimStart('*') -eq $archive) {
            $expected = $fields[0].ToLowerInvariant()
            break
        }
    }
    if (-not $expected) {
        throw "$BaseUrl/SHA256SUMS has no line for $archive; nothing was installed"
    }
    $actual = (Get-FileHash -Algorithm SHA256 -Path $zip).Hash.ToLowerInvariant()
    if ($actual -ne $expected) {
        throw "checksum mismatch for ${archive}: SHA256SUMS says $expected, the download is $actual; nothing was installed"
    }

    Expand-Archive -Path $zip -DestinationPath $tmp -Force
    $exe = Join-Path (Join-Path $tmp $stem) 'turnback.exe'
    if (-not (Test-Path -LiteralPath $exe -PathType Leaf)) {
        throw "$archive holds no $stem\turnback.exe"
    }
    New-Item -ItemType Directory -Force -Path $InstallDir | Out-Null
    # Copied beside its final name, then moved over it.
    $part = Join-Path $InstallDir ".turnback.$PID.part"
    Copy-Item -LiteralPath $exe -Destination $part -Force
    Move-Item -LiteralPath $part -Destination (Join-Path $InstallDir 'turnback.exe') -Force
    Write-Host "turnback-install: installed turnback $version ($target) as $(Join-Path $InstallDir 'turnback.exe')"
    $userPath = [System.Environment]::GetEnvironmentVariable('Path', 'User')
    if (-not (($userPath -split ';') -contains $InstallDir)) {
        Write-Host "turnback-install: $InstallDir is not on PATH; add it with"
        Write-Host "  [Environment]::SetEnvironmentVariable('Path', `"$InstallDir;`$([Environment]::GetEnvironmentVariable('Path', 'User'))`", 'User')"
    }
}
finally {
    Remove-Item -Recurse -Force -LiteralPath $tmp -ErrorAction SilentlyContinue
}
