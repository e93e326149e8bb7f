'use strict';
// Inside the executable this replaces better-sqlite3/lib/binding.js (which looks for the addon on
// disk next to itself). Same API: an addon object passed as `nativeBinding` is used as is, a path
// is dlopen'ed, and the default is the executable's unpacked addon, so every `new Database()` in
// the program works without passing anything.
const path = require('node:path');
const { loadAddon } = require('../index.ts');

function getBinding(nativeBinding) {
  if (typeof nativeBinding === 'object' && nativeBinding !== null) return nativeBinding;
  if (typeof nativeBinding === 'string') {
    const module = { exports: {} };
    process.dlopen(module, path.resolve(nativeBinding).replace(/(\.node)?$/, '.node'));
    return module.exports;
  }
  return loadAddon('better-sqlite3');
}

exports.getBinding = getBinding;
exports.getPrebuildPath = () => null;
