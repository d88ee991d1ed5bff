#!/usr/bin/env node
// The `turnback` command of the npm package `turnback`: it runs the binary
// of the platform package npm installed beside it (one of its
// optionalDependencies, which npm picks by their `os` and `cpu`). Nothing
// is downloaded and no install script runs. Written by `cargo xtask dist`.
"use strict";

const { spawn } = require("child_process");
const fs = require("fs");
const path = require("path");

// `${process.platform} ${process.arch}` -> the package with its binary.
const PLATFORMS = /*PLATFORMS*/ {};

function fail(message) {
  process.stderr.write(`turnback: ${message}\n`);
  process.exit(1);
}

// npm's shim that started this launcher (`<prefix>/bin/turnback`, or
// `<prefix>\turnback.cmd` on Windows): a name that stays when
// `npm update -g` or a reinstall replaces the packages. `turnback init`
// writes it (or `turnback`, when it is the one on PATH) into the agents'
// hooks, never a path inside node_modules.
function findShim() {
  let self;
  try {
    self = fs.realpathSync(__filename);
  } catch {
    return undefined;
  }
  const candidates = [];
  const invoked = process.argv[1] ? path.resolve(process.argv[1]) : "";
  if (invoked && !invoked.split(path.sep).includes("node_modules")) {
    candidates.push(invoked);
  }
  const modules = path.dirname(path.dirname(path.dirname(self))); // .../node_modules
  if (path.basename(modules) === "node_modules") {
    if (process.platform === "win32") {
      candidates.push(path.join(path.dirname(modules), "turnback.cmd"));
    } else if (path.basename(path.dirname(modules)) === "lib") {
      candidates.push(path.join(path.dirname(path.dirname(modules)), "bin", "turnback"));
    }
  }
  for (const c of candidates) {
    try {
      if (process.platform === "win32") {
        if (/\.cmd$/i.test(c) && fs.readFileSync(c, "utf8").includes("turnback\\bin\\turnback.js")) {
          return c;
        }
      } else if (fs.realpathSync(c) === self) {
        return c;
      }
    } catch {
      // Not there, or not readable: not the shim.
    }
  }
  return undefined;
}

const key = `${process.platform} ${process.arch}`;
const pkg = PLATFORMS[key];
if (!pkg) {
  fail(`there is no prebuilt binary for ${key}; build one with \`cargo install --locked turnback-cli\``);
}
const exe = process.platform === "win32" ? "turnback.exe" : "turnback";
let binary;
try {
  binary = require.resolve(`${pkg}/bin/${exe}`);
} catch {
  fail(
    `the package ${pkg}, which holds the binary for ${key}, is not installed ` +
      "(npm leaves it out with --omit=optional or --no-optional); " +
      "reinstall with `npm install -g turnback`",
  );
}

const env = { ...process.env };
const shim = findShim();
if (shim) {
  env.TURNBACK_SHIM = shim;
} else {
  delete env.TURNBACK_SHIM;
}

const child = spawn(binary, process.argv.slice(2), { stdio: "inherit", env });
// Ctrl+C and Ctrl+\ reach the whole foreground process group, the binary
// included, which decides what they do (`turnback exec` passes them to its
// command): the launcher only waits. A signal sent to the launcher alone
// is passed on.
const forwarded = { SIGINT: false, SIGQUIT: false, SIGTERM: true, SIGHUP: true };
for (const [signal, forward] of Object.entries(forwarded)) {
  try {
    process.on(signal, () => {
      if (forward) {
        child.kill(signal);
      }
    });
  } catch {
    // A signal this platform does not have.
  }
}
child.on("error", (e) => fail(`cannot run ${binary}: ${e.message}`));
child.on("exit", (code, signal) => {
  if (signal) {
    for (const s of Object.keys(forwarded)) {
      process.removeAllListeners(s);
    }
    process.kill(process.pid, signal);
    return;
  }
  process.exit(code === null ? 1 : code);
});
