"""Files to Documents: the walk (`walk`), one file's loading (`documents`), and one module per
format that needs its own reader (`html`, `pdf`, `chat`).
"""
