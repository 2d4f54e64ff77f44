// Package dsml reads and writes the DSML tool-call syntax of DeepSeek V4.
//
// The model invokes tools by writing one block of XML-like tags whose names
// contain the DSML special token:
//
//	<｜DSML｜tool_calls>
//	<｜DSML｜invoke name="bash">
//	<｜DSML｜parameter name="command" string="true">ls -la</｜DSML｜parameter>
//	<｜DSML｜parameter name="timeout" string="false">10</｜DSML｜parameter>
//	</｜DSML｜invoke>
//	</｜DSML｜tool_calls>
//
// [Render] turns tool calls held as JSON back into the canonical block that a
// prompt embeds, [Parse] splits a finished generation into reasoning, visible
// content and tool calls, and [Stream] does the same incrementally while the
// model is still writing, reporting through [Stream.DecodeState] whether the
// next token belongs to DSML structure (decoded greedily) or to an argument
// payload (sampled normally).
//
// The behaviour follows upstream ds4_server.c byte for byte where the two
// can be compared, including its lenient JSON reading (numbers as C strtod
// reads them, optional commas between object members) and its handling of
// malformed or degraded blocks (the short "<DSML｜…>" spelling and plain XML
// tags are accepted as well).
package dsml
