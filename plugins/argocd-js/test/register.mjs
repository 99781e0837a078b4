// `node --import ./test/register.mjs ...`: installs host-loader.mjs (see there).
import { register } from "node:module";
register("./host-loader.mjs", import.meta.url);
