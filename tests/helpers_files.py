"""Small documents of every readable type, made by the tests themselves.

``pdf_bytes`` is a minimal PDF writer (pypdf reads PDFs but does not lay out text): each
page is a list of text lines in Helvetica, optionally with a grey image of raw bytes
(which makes large files cheaply and gives image-only pages).
"""
from __future__ import annotations

import json
from pathlib import Path
from typing import Optional, Sequence


def _pdf_string(text: str) -> bytes:
    escaped = text.replace("\\", "\\\\").replace("(", "\\(").replace(")", "\\)")
    return b"(" + escaped.encode("latin-1") + b")"


def pdf_bytes(pages: Sequence[Sequence[str]], title: Optional[str] = None, image_bytes: int = 0) -> bytes:
    """A PDF with one page per item of ``pages`` (its text lines); ``image_bytes`` > 0 puts a
    grey image of about that many bytes on each page."""
    objects: list[bytes] = []  # object n is objects[n - 1]

    def add(body: bytes) -> int:
        objects.append(body)
        return len(objects)

    catalog, pages_obj = add(b""), add(b"")
    font = add(b"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>")
    page_ids = []
    side = int(image_bytes ** 0.5) if image_bytes else 0
    for lines in pages:
        ops = [b"BT /F1 11 Tf 14 TL 56 780 Td"] + [_pdf_string(line) + b" Tj T*" for line in lines] + [b"ET"]
        resources = b"/Font << /F1 %d 0 R >>" % font
        if side:
            pixels = bytes((i * 7) % 251 for i in range(side * side))
            image = add(b"<< /Type /XObject /Subtype /Image /Width %d /Height %d /ColorSpace /DeviceGray "
                        b"/BitsPerComponent 8 /Length %d >>\nstream\n" % (side, side, len(pixels)) + pixels
                        + b"\nendstream")
            resources += b" /XObject << /Im1 %d 0 R >>" % image
            ops.append(b"q 200 0 0 200 56 300 cm /Im1 Do Q")
        stream = b"\n".join(ops)
        content = add(b"<< /Length %d >>\nstream\n" % len(stream) + stream + b"\nendstream")
        page_ids.append(add(b"<< /Type /Page /Parent %d 0 R /MediaBox [0 0 612 842] /Resources << %s >> "
                            b"/Contents %d 0 R >>" % (pages_obj, resources, content)))
    objects[catalog - 1] = b"<< /Type /Catalog /Pages %d 0 R >>" % pages_obj
    kids = b" ".join(b"%d 0 R" % p for p in page_ids)
    objects[pages_obj - 1] = b"<< /Type /Pages /Kids [%s] /Count %d >>" % (kids, len(page_ids))
    info = add(b"<< /Title " + _pdf_string(title) + b" >>") if title else None
    return _pdf_file(objects, catalog, info)


def _pdf_file(objects: Sequence[bytes], catalog: int, info: Optional[int] = None) -> bytes:
    """Objects 1..n (``objects[n - 1]``) written out with their cross-reference table."""
    out = bytearray(b"%PDF-1.4\n")
    offsets = []
    for number, body in enumerate(objects, start=1):
        offsets.append(len(out))
        out += b"%d 0 obj\n" % number + body + b"\nendobj\n"
    xref = len(out)
    out += b"xref\n0 %d\n0000000000 65535 f \n" % (len(objects) + 1)
    out += b"".join(b"%010d 00000 n \n" % o for o in offsets)
    out += b"trailer\n<< /Size %d /Root %d 0 R" % (len(objects) + 1, catalog)
    out += (b" /Info %d 0 R" % info if info else b"") + b" >>\nstartxref\n%d\n%%%%EOF\n" % xref
    return bytes(out)


def flate_bomb_pdf(pages: int, stream_bytes: int) -> bytes:
    """A PDF whose ``pages`` pages all draw one shared Flate stream of ``stream_bytes`` text
    operators: a few kilobytes on disk, ``pages * stream_bytes`` for a reader to go through."""
    import zlib

    op = b"BT /F1 11 Tf 56 780 Td (All work and no play makes a dull reader.) Tj ET\n"
    packed = zlib.compress(op * (stream_bytes // len(op)), 9)
    objects = [b"<< /Type /Catalog /Pages 2 0 R >>", b"",
               b"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>",
               b"<< /Length %d /Filter /FlateDecode >>\nstream\n" % len(packed) + packed + b"\nendstream"]
    page_ids = list(range(5, 5 + pages))
    objects += [b"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 842] /Resources << /Font << /F1 3 0 R >> >> "
                b"/Contents 4 0 R >>"] * pages
    objects[1] = b"<< /Type /Pages /Kids [%s] /Count %d >>" % (b" ".join(b"%d 0 R" % p for p in page_ids), pages)
    return _pdf_file(objects, 1)


def zip_bomb_docx(text_bytes: int) -> bytes:
    """A real .docx whose body holds ``text_bytes`` of one repeated paragraph: a few hundred
    kilobytes packed. Written part by part, never whole in memory."""
    import io
    import zipfile

    import docx

    plain = io.BytesIO()
    docx.Document().save(plain)
    paragraph = b"<w:p><w:r><w:t>All work and no play makes a dull reader.</w:t></w:r></w:p>"
    out = io.BytesIO()
    with zipfile.ZipFile(plain) as source, zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as bomb:
        for part in source.infolist():
            if part.filename != "word/document.xml":
                bomb.writestr(part, source.read(part))
                continue
            head, _, tail = source.read(part).partition(b"<w:body>")
            with bomb.open("word/document.xml", "w", force_zip64=True) as body:
                body.write(head + b"<w:body>")
                block = paragraph * 10_000
                for _ in range(text_bytes // len(block)):
                    body.write(block)
                body.write(tail)
    return out.getvalue()


def write_pdf(path: Path, pages: Sequence[Sequence[str]], title: Optional[str] = None, image_bytes: int = 0) -> Path:
    path.write_bytes(pdf_bytes(pages, title, image_bytes))
    return path


def write_encrypted_pdf(path: Path, pages: Sequence[Sequence[str]]) -> Path:
    import io

    from pypdf import PdfReader, PdfWriter

    writer = PdfWriter(clone_from=PdfReader(io.BytesIO(pdf_bytes(pages))))
    writer.encrypt(user_password="secret", algorithm="RC4-128")
    with open(path, "wb") as f:
        writer.write(f)
    return path


def write_docx(path: Path, title: str, sections: Sequence[tuple[str, Sequence[str]]],
               subsections: Sequence[tuple[str, Sequence[str]]] = ()) -> Path:
    """A .docx with a Title, then one Heading 1 per section (and Heading 2 subsections
    after the last one), each followed by its paragraphs."""
    import docx

    document = docx.Document()
    document.add_heading(title, level=0)
    for level, items in ((1, sections), (2, subsections)):
        for heading, paragraphs in items:
            document.add_heading(heading, level=level)
            for paragraph in paragraphs:
                document.add_paragraph(paragraph)
    document.save(str(path))
    return path


def write_html(path: Path, title: str, heading: str, paragraphs: Sequence[str]) -> Path:
    body = "".join(f"<p>{p}</p>" for p in paragraphs)
    path.write_text(
        f"<!doctype html><html><head><meta charset='utf-8'><title>{title}</title>"
        "<style>body {{ color: red }} .menu {{ display: none }}</style></head><body>"
        "<nav><a href='/'>Home</a> <a href='/shop'>Shop menu link</a></nav>"
        "<header>Site banner text</header>"
        f"<main><h1>{heading}</h1>{body}<script>var tracking = 'analytics script';</script></main>"
        "<footer>Copyright footer text</footer></body></html>", encoding="utf-8")
    return path


def write_jsonl(path: Path, records: Sequence[dict]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in records), encoding="utf-8")
    return path
