/**
 * The console's entry: the styles (uPlot's, then ours) and the page, rendered into `#app`.
 */
import "uplot/dist/uPlot.min.css";
import "./styles.css";
import { render } from "preact";
import { App } from "./app.tsx";

const root = document.getElementById("app");
if (root) render(<App />, root);
