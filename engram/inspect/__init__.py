"""The web inspector: what an agent remembers, how strongly, and why — six views over the projections.

- `source`: the narrow reading interface the views need (`MemoryReader`);
- `adapter`: its one implementation over engram (the only module that knows where data comes from);
- `timeline`, `curves`, `graph`, `recall`, `working`, `discussion`: the views' aggregations (plain functions
  of a reader, returning JSON-able data, bounded and paged so that a 10,000-trace agent stays fast);
- `api`: the views by name with string parameters (what the server's endpoints and a report file carry);
- `page`: the HTML, with Plotly and the data inlined.

An interface: it never imports Ray or the actors.
"""
