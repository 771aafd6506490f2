// Parse a Mermaid diagram read from stdin with Mermaid's own parser (mermaid.parse): exit 0 and print the diagram
// type when it parses, exit 1 with the parser's message when it does not. Mermaid sanitises labels with DOMPurify,
// which needs a DOM: jsdom's window stands in for a browser's.
import { JSDOM } from "jsdom";

const { window } = new JSDOM("");
globalThis.window = window;
globalThis.document = window.document;
const { default: mermaid } = await import("mermaid");

const chunks = [];
for await (const chunk of process.stdin) chunks.push(chunk);
try {
  const parsed = await mermaid.parse(Buffer.concat(chunks).toString("utf8"));
  console.log(parsed.diagramType);
} catch (error) {
  console.error(error.message ?? String(error));
  process.exit(1);
}
