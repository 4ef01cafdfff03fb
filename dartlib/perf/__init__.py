"""Layer ``perf``: throughput (``throughput``), the cost table (``costs``) and corruption speed
(``corruption_speed``): primitives the
studies use. Imports ``analysis`` and the layers below."""
