"""Layer ``perf``: throughput (``throughput``), the cost table (``costs``) and corruption speed
(``corruption_speed``). Imports the layers below."""
