'use strict';
// Inside the executable this replaces isolated-vm/isolated-vm.js (which finds its addon with
// node-gyp-build on disk): same export, the addon's `ivm`, from the unpacked copy.
module.exports = require('../index.ts').loadAddon('isolated-vm').ivm;
