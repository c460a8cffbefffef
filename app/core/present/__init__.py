"""What people read: texts and tables (views) and figures (plots), Gradio- and LIT-free."""
